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

# no debug text on the page: the status (for tests) is hidden, nothing logs
grep -q 'console\.' "$W/r.html" && fail "the page logs to the console"
grep -q '<pre id="tcuda-status" hidden' "$W/dom.html" || fail "the status line is visible on the page"

# zoom and segments at an entry, given in the address: the view's segments
# and active bytes against python's reading of the trace up to that entry
"$CLI" viz "$W/s.pickle" -o "$W/r.html" 2>/dev/null
for at in 1 150 333 600; do
  render "$W/r.html#from=100&to=400&at=$at" | status_of > "$W/zoom.json"
  python3 - "$W/s.pickle" "$W/zoom.json" "$at" <<'PY' || fail "segments at entry $at"
import json, pickle, sys
s = pickle.load(open(sys.argv[1], 'rb')); st = json.load(open(sys.argv[2])); at = int(sys.argv[3])
assert st.get('ok') is True, st
v = st['view']
assert (v['from'], v['to'], v['at']) == (100, 400, at), v
t = s['device_traces'][0][:at]   # step `at`: after the first `at` entries
segs, live = {}, {}
for e in t:
  if e['action'] == 'segment_alloc': segs[e['addr']] = e['size']
  elif e['action'] == 'segment_free': segs.pop(e['addr'], None)
  elif e['action'] == 'alloc': live[e['addr']] = e['size']
  elif e['action'] == 'free_completed': live.pop(e['addr'], None)
assert v['segments'] == len(segs), (v, len(segs))
assert v['active_bytes'] == sum(live.values()), (v, sum(live.values()))
assert v['blocks'] == len(live), (v, len(live))
# the blocks' colours are the legend's, or those of their allocations in the chart
legend = set(v['legend_colors']); chart = set(v['chart_colors'])
odd = [c for c in v['block_colors'] if c not in legend and c not in chart]
assert not odd, (odd, legend)
print('at', at, ':', v['segments'], 'segments,', v['blocks'], 'blocks,', v['active_bytes'], 'bytes')
PY
done

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

# a drag across the chart zooms into that range; a click there shows the
# segments at that entry (the events are added to the page's own script,
# the only one its policy runs)
python3 - "$W/r.html" "$W/drag.html" <<'PY' || fail "making the dragged page"
import sys
page = open(sys.argv[1]).read()
end = page.rindex("})();")
ev = ("const c = document.getElementById('timeline'), r = c.getBoundingClientRect();\n"
      "const ev = (t, x) => new MouseEvent(t, {clientX: r.left + x, clientY: r.top + 100, bubbles: true});\n"
      "c.dispatchEvent(ev('mousedown', 400)); window.dispatchEvent(ev('mousemove', 700)); window.dispatchEvent(ev('mouseup', 700));\n"
      "c.dispatchEvent(ev('mousedown', 550)); window.dispatchEvent(ev('mouseup', 550));\n")
open(sys.argv[2], "w").write(page[:end] + ev + page[end:])
PY
render "$W/drag.html" | status_of > "$W/drag.json"
grep -E 'Uncaught|CONSOLE.*(Error|error)' "$W/console.log" && fail "console errors after the drag"
python3 - "$W/s.pickle" "$W/drag.json" <<'PY' || fail "the drag did not zoom"
import json, pickle, sys
s = pickle.load(open(sys.argv[1], 'rb')); st = json.load(open(sys.argv[2]))
v = st['view']; n = len(s['device_traces'][0])
# 300 of the plot's ~1124 pixels, from pixel ~330: about a quarter of the history
assert 0 < v['from'] < v['to'] < n and 0.2 < (v['to'] - v['from']) / n < 0.35, v
assert v['from'] < v['at'] < v['to'], v
segs = set()
for e in s['device_traces'][0][:v['at']]:
  if e['action'] == 'segment_alloc': segs.add(e['addr'])
  elif e['action'] == 'segment_free': segs.discard(e['addr'])
assert v['segments'] == len(segs), (v, len(segs))
print('drag: entries', v['from'], '..', v['to'], '; segments at', v['at'], ':', v['segments'])
PY

# a 1M-entry history (bench/whatif_gen.py): the page stays small and
# renders fast, and its series keeps every bucket's extremes, the exact
# global peak among them (docs/performance.md has the figures)
if python3 "$(dirname "$0")/../../bench/whatif_gen.py" "$W/long.pickle" --entries 1000000 >/dev/null; then
  "$CLI" viz "$W/long.pickle" -o "$W/long.html" 2>/dev/null || fail "long viz"
  size=$(stat -c %s "$W/long.html")
  [ "$size" -lt 5000000 ] || fail "the page of a 1M-entry history is $size bytes (over 5 MB)"
  render "$W/long.html" | status_of > "$W/long.json"
  python3 - "$W/long.pickle" "$W/long.html" "$W/long.json" <<'PY' || fail "long history's series"
import json, pickle, re, sys
s = pickle.load(open(sys.argv[1], 'rb'))
page = open(sys.argv[2]).read(); st = json.load(open(sys.argv[3]))
d = json.loads(re.search(r'<script id="viz-data" type="application/json">(.*?)</script>', page, re.S).group(1))
assert st.get('ok') is True, st
t = s['device_traces'][0]
# active bytes after each entry: allocs add, free_completed subtract; blocks
# live at the end without a recorded alloc count from the start
n = len(t); delta = [0] * (n + 2); live = {}
for i, e in enumerate(t):
  if e['action'] == 'alloc': live[e['addr']] = (i + 1, e['size']); delta[i + 1] += e['size']
  elif e['action'] == 'free_completed':
    if e['addr'] in live: delta[i + 1] -= live.pop(e['addr'])[1]
    else: delta[0] += e['size']; delta[i + 1] -= e['size']
for g in s['segments']:
  a = g['address']
  for b in g['blocks']:
    if b['state'] != 'inactive' and a not in live: delta[0] += b['requested_size']
    a += b['size']
tot, run = [], 0
for i in range(n + 1): run += delta[i]; tot.append(run)
peak = max(tot)
sr = d['series']; lo = sr['lo'] + [n + 1]
assert len(sr['max']) <= 65536 and sr['steps'] == n + 1
assert max(sr['max']) == peak == st['peak_active_bytes'] == st['series_peak_bytes'], (max(sr['max']), peak)
for k in range(len(sr['lo'])):
  seg = tot[lo[k]:lo[k + 1]]
  assert sr['min'][k] == min(seg) and sr['max'][k] == max(seg), k
assert st['trace_entries'] == n and st['listed_allocations'] <= 20000 < st['allocations'], st
assert st['render_ms'] < 8000, st['render_ms']
print('1M entries: page', len(page), 'bytes,', len(sr['lo']), 'buckets, peak', peak, 'kept; rendered in', st['render_ms'], 'ms')
PY
else
  fail "bench/whatif_gen.py failed"
fi

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
  if [ "$2" = false ]; then # numbers that are not numbers: refused, naming the field, and no page
    rm -f "$W/h.html"
    "$CLI" viz "$1" -o "$W/h.html" 2>"$W/err" && fail "viz accepted $1"
    grep -q "not a number\|not a memory snapshot" "$W/err" || fail "message for $1: $(cat "$W/err")"
    [ -e "$W/h.html" ] && fail "viz wrote a page for $1"
    return 0
  fi
  "$CLI" viz "$1" -o "$W/h.html" 2>/dev/null || fail "viz refused $1"
  grep -q "Content-Security-Policy" "$W/h.html" || fail "no Content-Security-Policy in the page"
  render "$W/h.html" > "$W/hdom.html" || fail "chromium failed on $1"
  grep -q '<title>tcuda memory viewer</title>' "$W/hdom.html" || fail "the page title changed for $1"
  grep -qi '<img' "$W/hdom.html" && fail "markup from $1 became an element"
  grep -q 'pwned' "$W/console.log" && fail "script from $1 ran"
  status_of < "$W/hdom.html" | python3 -c '
import json, sys
st = json.load(sys.stdin)
assert st.get("ok") is True, st
' || fail "status for $1"
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
