#!/usr/bin/env bash
# tcuda viz in headless Chromium: the page renders with no script error, its
# totals (written into #tcuda-status) match the snapshot as python3 reads it,
# a screenshot is taken, and 100 000+ trace entries render in time.
# Exit 77 (skipped) without chromium or python3 (scripts/deps installs them).
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ] || ! command -v python3 >/dev/null; then echo "SKIPPED: chromium or python3 missing"; exit 77; fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

render() { # page -> DOM on stdout; console errors land in $W/console.log
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/prof" \
    --enable-logging=stderr --v=0 --virtual-time-budget=20000 --dump-dom "file://$1" 2>"$W/console.log"
}
status_of() { python3 -c 'import sys,re,html; m=re.search(r"<pre id=\"tcuda-status\"[^>]*>(.*?)</pre>", sys.stdin.read(), re.S); print(html.unescape(m.group(1)) if m else "")'; }

# a trace cut mid-run, so live blocks remain at the end
head -n 700 "$DATA/torch/multi_stream3.trace" > "$W/part.trace"
"$CLI" replay --simulate --history "$W/s.pickle" "$W/part.trace" >/dev/null || fail "replay --history"
"$CLI" replay --simulate --history "$W/s.json" "$W/part.trace" >/dev/null || fail "replay --history json"

check() { # snapshot -> page -> totals against python's reading of the snapshot
  "$CLI" viz "$1" -o "$W/r.html" 2>/dev/null || fail "viz $1"
  grep -q 'https\?://' "$W/r.html" && fail "the page references the network"
  render "$W/r.html" > "$W/dom.html" || fail "chromium failed on $1"
  status_of < "$W/dom.html" > "$W/status.json"
  grep -E 'Uncaught|CONSOLE.*(Error|error)' "$W/console.log" && fail "console errors for $1"
  python3 - "$1" "$W/status.json" <<'PY' || fail "totals differ for $1"
import json, pickle, sys
path, st = sys.argv[1], json.load(open(sys.argv[2]))
s = json.load(open(path)) if path.endswith('.json') else pickle.load(open(path, 'rb'))
assert st.get('ok') is True, st
t = s['device_traces'][0]
segs = [g for g in s['segments'] if g['device'] == 0]
blocks = [b for g in segs for b in g['blocks']]
want = {
  'segments': len(segs), 'blocks': len(blocks),
  'reserved_bytes': sum(g['total_size'] for g in segs),
  'allocated_bytes': sum(b['size'] for b in blocks if b['state'] == 'active_allocated'),
  'requested_bytes': sum(b['requested_size'] for b in blocks if b['state'] != 'inactive'),
  'trace_entries': len(t), 'allocs': sum(e['action'] == 'alloc' for e in t),
  'frees': sum(e['action'] == 'free_completed' for e in t),
}
cur = peak = 0
for e in t:
  cur += e['size'] if e['action'] == 'alloc' else -e['size'] if e['action'] == 'free_completed' else 0
  peak = max(peak, cur)
want['peak_active_bytes'] = peak
want['final_active_bytes'] = want['requested_bytes']  # the timeline ends where the segments are
bad = {k: (st.get(k), v) for k, v in want.items() if st.get(k) != v}
assert not bad, bad
print('totals ok:', json.dumps(st))
PY
}
check "$W/s.pickle"
check "$W/s.json"
cp "$W/status.json" "$W/keep.json"

# screenshot of the pickle's page
"$CLI" viz "$W/s.pickle" -o "$W/r.html" 2>/dev/null
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/prof" --hide-scrollbars \
  --window-size=1260,1400 --virtual-time-budget=20000 --screenshot="$W/shot.png" "file://$W/r.html" 2>/dev/null
[ -s "$W/shot.png" ] || fail "no screenshot"
[ -n "${TCUDA_VIZ_KEEP:-}" ] && cp "$W/shot.png" "$W/r.html" "$TCUDA_VIZ_KEEP/"

# 100 000+ entries: 36 000 allocations, up to ~3000 live, sizes 512 B .. 64 MiB
python3 - > "$W/big.trace" <<'PY'
import random
r = random.Random(7); live = []; nid = 0
for i in range(36000):
  if live and (len(live) > 3000 or r.random() < 0.45):
    print('f', live.pop(r.randrange(len(live))))
  nid += 1; live.append(nid)
  print('a', nid, int(2 ** r.uniform(9, 26)), r.choice([0, 0, 1]))
PY
"$CLI" replay --simulate --history "$W/big.pickle" "$W/big.trace" >/dev/null || fail "big replay"
"$CLI" viz "$W/big.pickle" -o "$W/big.html" 2>/dev/null || fail "big viz"
render "$W/big.html" | status_of > "$W/big.json"
python3 - "$W/big.json" <<'PY' || fail "big page"
import json, sys
st = json.load(open(sys.argv[1]))
assert st.get('ok') is True and st['trace_entries'] >= 100000, st
# responsive: one full build + draw, measured by the page itself
assert st['render_ms'] < 8000, st['render_ms']
print('100k entries:', st['trace_entries'], 'entries rendered in', st['render_ms'], 'ms')
PY

# hostile snapshots: every string reaches the page as text, numbers must be
# numbers, and the page's policy lets no inline handler or remote load run
python3 - "$W" <<'PY'
import json, pickle, sys, copy
w = sys.argv[1]
base = json.load(open(w + "/s.json"))
evil = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
def frames():
  return [{"name": evil, "filename": evil, "line": 1}]
ok = copy.deepcopy(base)
ok["allocator_settings"] = {evil: 1, "roundup_power2_divisions": {evil: evil}}
for e in ok["device_traces"][0]:
  e["frames"] = frames()
for g in ok["segments"]:
  for b in g["blocks"]:
    b["frames"] = frames()
bad_size = copy.deepcopy(base); bad_size["segments"][0]["blocks"][0]["size"] = evil
bad_stream = copy.deepcopy(base); bad_stream["device_traces"][0][0]["stream"] = evil
bad_seg_size = copy.deepcopy(base); bad_seg_size["segments"][0]["total_size"] = "1024"
for name, doc in (("ok", ok), ("bad_size", bad_size), ("bad_stream", bad_stream), ("bad_seg_size", bad_seg_size)):
  json.dump(doc, open("%s/h_%s.json" % (w, name), "w"))
  pickle.dump(doc, open("%s/h_%s.pickle" % (w, name), "wb"), protocol=4)
pickle.dump({"a": 1}, open(w + "/notsnap.pickle", "wb"), protocol=4)
PY
hostile() { # snapshot, expected ok (true/false)
  "$CLI" viz "$1" -o "$W/h.html" 2>/dev/null || fail "viz refused $1"
  grep -q "Content-Security-Policy" "$W/h.html" || fail "no Content-Security-Policy in the page"
  render "$W/h.html" > "$W/hdom.html" || fail "chromium failed on $1"
  grep -q '<title>tcuda memory viewer</title>' "$W/hdom.html" || fail "the page title changed for $1"
  grep -qi '<img' "$W/hdom.html" && fail "markup from $1 became an element"
  grep -q 'pwned' "$W/console.log" && fail "script from $1 ran"
  status_of < "$W/hdom.html" | python3 -c '
import json, sys
st = json.load(sys.stdin)
want = sys.argv[1] == "true"
assert st.get("ok") is want, st
if not want: assert "not a number" in st["error"] or "not a memory snapshot" in st["error"], st
' "$2" || fail "status for $1"
}
for f in pickle json; do
  hostile "$W/h_ok.$f" true
  hostile "$W/h_bad_size.$f" false
  hostile "$W/h_bad_stream.$f" false
  hostile "$W/h_bad_seg_size.$f" false
done
hostile "$W/notsnap.pickle" false
# a fresh script nonce per page
"$CLI" viz "$W/s.json" -o "$W/n1.html" 2>/dev/null; "$CLI" viz "$W/s.json" -o "$W/n2.html" 2>/dev/null
n1=$(grep -o "nonce-[0-9a-f]*" "$W/n1.html" | head -1); n2=$(grep -o "nonce-[0-9a-f]*" "$W/n2.html" | head -1)
[ ${#n1} -eq 38 ] && [ "$n1" != "$n2" ] || fail "script nonce not fresh: '$n1' '$n2'"
echo "hostile snapshots ok"

# JSON that is not a memory snapshot is refused, saying why
for doc in '{}' '{"segments": 3}' '{"segments": [], "device_traces": {}}' '[1, 2]' '{"segments": [] } x' '{"segments": [1,}'; do
  printf '%s' "$doc" > "$W/nj.json"
  "$CLI" viz "$W/nj.json" -o "$W/nj.html" 2>"$W/err"; rc=$?
  [ $rc -eq 1 ] || fail "viz accepted non-snapshot JSON '$doc' (exit $rc)"
  grep -q "is not a memory snapshot" "$W/err" || grep -q "is not a snapshot" "$W/err" || fail "message for '$doc': $(cat "$W/err")"
  [ -e "$W/nj.html" ] && fail "viz wrote a page for '$doc'"
done

# bad input
echo "not a snapshot" > "$W/bad.txt"
"$CLI" viz "$W/bad.txt" -o "$W/x.html" 2>"$W/err" && fail "viz accepted a text file"
grep -q "is not a snapshot" "$W/err" || fail "viz message: $(cat "$W/err")"
[ -e "$W/x.html" ] && fail "viz wrote a page for bad input"
"$CLI" viz "$W/missing.pickle" 2>"$W/err" && fail "viz accepted a missing file"
grep -q "cannot read" "$W/err" || fail "missing-file message"
"$CLI" viz 2>/dev/null; [ $? -eq 2 ] || fail "viz without arguments"
"$CLI" viz a b 2>/dev/null; [ $? -eq 2 ] || fail "viz with two snapshots"
"$CLI" viz "$W/s.pickle" -o 2>/dev/null; [ $? -eq 2 ] || fail "viz -o without a file"
"$CLI" replay --simulate --history "" "$W/part.trace" >/dev/null 2>&1 && fail "replay --history ''"
"$CLI" replay --simulate --history /nonexistent-dir/h.pickle "$W/part.trace" >/dev/null 2>"$W/err" && fail "unwritable history"
grep -q "/nonexistent-dir/h.pickle" "$W/err" || fail "unwritable history message"
# tcuda snapshot on a trace: summary, pickle, json
"$CLI" snapshot --trace "$W/part.trace" > "$W/sum.txt" || fail "snapshot summary"
grep -q "tcuda CUDA memory summary, device ID 0" "$W/sum.txt" || fail "summary title"
"$CLI" snapshot --trace "$W/part.trace" --pickle -o "$W/o.pickle" || fail "snapshot --pickle"
"$CLI" snapshot --trace "$W/part.trace" --json > "$W/o.json" || fail "snapshot --json"
python3 -c "import pickle,json,sys; p=pickle.load(open(sys.argv[1],'rb')); j=json.load(open(sys.argv[2])); assert len(p['segments'])==len(j['segments'])>0" "$W/o.pickle" "$W/o.json" || fail "snapshot files"
"$CLI" snapshot --json --pickle 2>/dev/null; [ $? -eq 2 ] || fail "--json --pickle"
"$CLI" snapshot --config x 2>/dev/null; [ $? -eq 2 ] || fail "--config without --trace"
"$CLI" snapshot --trace "$W/part.trace" --config bogus:1 2>"$W/err" && fail "bad config accepted"
grep -q "bogus" "$W/err" || fail "bad config message"
echo "ok"
