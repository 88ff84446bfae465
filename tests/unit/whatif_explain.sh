#!/usr/bin/env bash
# What holds the memory (tcuda whatif's "explain") and tcuda compare, on
# torch's recorded snapshots (tests/data/whatif): the holders at the peaks
# and the first OOM against a reference walked from the pickles by
# tests/tools/explain_reference.py; the text; the CLI convention of
# compare and its errors naming the argument; hostile stacks staying
# bounded.
set -u
cli=${TCUDA_CLI:?}
src=${TCUDA_SOURCE_DIR:?}
data=${TCUDA_TEST_DATA:-$src/tests/data}/whatif
command -v python3 > /dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run RC SUBSTRING ARGS...: exit status RC and SUBSTRING on stderr
run() {
  local want=$1 sub=$2; shift 2
  "$cli" "$@" > "$tmp/out" 2> "$tmp/err"; local got=$?
  [ "$got" = "$want" ] || bad "tcuda $* -> exit $got, want $want: $(head -c 600 "$tmp/err")"
  [ -z "$sub" ] || grep -qF -- "$sub" "$tmp/err" || bad "tcuda $*: stderr lacks '$sub': $(head -c 600 "$tmp/err")"
}

python3 "$src/tests/tools/explain_reference.py" "$cli" "$data" || fail=1

# ---- the text ----
"$cli" whatif "$data/tf_limit.pickle" --config "" --fraction 0.002291207795694817 > "$tmp/out" || bad "whatif tf_limit"
grep -q "^what holds the memory" "$tmp/out" || bad "whatif: no 'what holds the memory' section"
grep -q "^at peak reserved (request #" "$tmp/out" && grep -q "^at peak allocated" "$tmp/out" ||
  bad "whatif: no peak instants in the text"
grep -q "^at the first OOM" "$tmp/out" || bad "whatif tf_limit: no first OOM in the text"
grep -q "inactive split blocks, .* whole free segments" "$tmp/out" || bad "whatif: no split of the cached bytes"
grep -q "^stacks: no allocation in this snapshot has a stack: .*_record_memory_history(.*stacks=" "$tmp/out" ||
  bad "whatif: no word on how to record stacks"
grep -q "  (no stack recorded)$" "$tmp/out" || bad "whatif: a holder without stacks is not '(no stack recorded)'"
# with one allocation given frames the snapshot has stacks: a holder
# without any then had no Python frames (as on autograd's backward thread)
python3 - "$data/tf_default.pickle" "$tmp/onestack.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
e = next(e for e in d["device_traces"][0] if e["action"] == "alloc")
e["frames"] = [{"name": "step", "filename": "/home/u/train.py", "line": 12}]
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
"$cli" whatif "$tmp/onestack.pickle" --config "" > "$tmp/out1" || bad "whatif onestack"
grep -q "  (no Python frames: allocated outside Python" "$tmp/out1" && ! grep -q "(no stack recorded)" "$tmp/out1" ||
  bad "whatif: with stacks, a holder without one is not '(no Python frames ...)'"
# cnn_limit's first OOM has no frames (an autograd thread's); a copy gives
# it those torch recorded for a later one, from the user's forward
python3 - "$data/cnn_limit.pickle" "$tmp/oomstack.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
ooms = [e for e in d["device_traces"][0] if e["action"] == "oom"]
ooms[0]["frames"] = next(e["frames"] for e in ooms if e["frames"])
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
"$cli" whatif "$tmp/oomstack.pickle" --config "" --fraction 0.0018441428599494868 > "$tmp/out" || bad "whatif cnn_limit"
grep -A3 "first OOM's stack (user frames" "$tmp/out" | grep -q "record_torch_histories.py:" ||
  bad "whatif cnn_limit: the first OOM's stack lacks the user frame: $(grep -A3 "first OOM" "$tmp/out")"
grep -A3 "first OOM's stack (user frames" "$tmp/out" | grep -q "conv.py" &&
  bad "whatif cnn_limit: torch's own frames in the first OOM's stack"
run 2 "--top" whatif "$data/side_stream.pickle" --top 0

# ---- compare: convention and errors naming the argument ----
"$cli" compare --help > "$tmp/out" 2> "$tmp/err" || bad "compare --help exited $?"
grep -q "^usage: tcuda compare BEFORE AFTER" "$tmp/out" || bad "compare --help: no usage"
[ -s "$tmp/err" ] && bad "compare --help wrote to stderr"
"$cli" --help | grep -q "^  compare " || bad "tcuda --help does not list compare"
b="$data/side_stream.pickle"
run 2 "no snapshots given" compare
run 2 "no AFTER snapshot given" compare "$b"
run 2 "unexpected argument" compare "$b" "$b" "$b"
run 2 "unknown option '--config'" compare --config x "$b" "$b"
run 1 "before: $tmp/none: cannot open" compare "$tmp/none" "$b"
run 1 "after: $tmp/none: cannot open" compare "$b" "$tmp/none"
echo garbage > "$tmp/g.pickle"
run 1 "after: $tmp/g.pickle: the file is neither" compare "$b" "$tmp/g.pickle"
python3 - "$b" "$tmp/two.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
d["device_traces"].append([])
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
run 1 "after: the snapshots record different devices (before 1, after 2)" compare "$b" "$tmp/two.pickle"
run 1 "before: $b: device 1" compare "$b" "$tmp/two.pickle" --device 1
"$cli" compare "$b" "$b" > "$tmp/out" || bad "compare a snapshot with itself"
grep -q "^change: peak reserved +0 bytes (x1.000000)" "$tmp/out" || bad "compare: $(grep change "$tmp/out")"
grep -q "^at each peak reserved, by stack:" "$tmp/out" || bad "compare: no side-by-side holders"

# ---- hostile stacks: one list of many frames shared through the memo by
# every entry, and long names; the scan and the budget keep it bounded ----
python3 - "$b" "$tmp/h.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
frame = {"name": "n" * 5000, "filename": "/torch/" + "f" * 5000, "line": 1}
frames = [frame] * 300000
for e in d["device_traces"][0]:
    e["frames"] = frames
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
start=$(date +%s)
"$cli" whatif "$tmp/h.pickle" --config "" --json > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || bad "hostile stacks: exit $rc"
[ "$rc" = 1 ] && ! grep -q "budget" "$tmp/err" && bad "hostile stacks: $(head -c 300 "$tmp/err")"
[ $(( $(date +%s) - start )) -le 20 ] || bad "hostile stacks took over 20 s"
if [ "$rc" = 0 ]; then
  python3 -c "
import json, sys
h = json.load(open(sys.argv[1]))['explain']['peak_reserved']['holders']
fr = h[0]['frames']
assert len(fr) == 3 and all(len(f.encode()) < 600 for f in fr), fr
" "$tmp/out" || bad "hostile stacks: frames not cut"
fi
# ---- the page's section, in headless Chromium when there is one: a
# table per instant, one row per holder, and hostile frame text as text ----
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$CHROME" ]; then
  python3 - "$data/side_stream.pickle" "$tmp/evil.pickle" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
evil = '</script><img src=x onerror="document.title=1"><script>document.title="pwned"</script>'
for e in d["device_traces"][0]:
    if e["action"] == "alloc":
        e["frames"] = [{"name": evil, "filename": "/home/u/" + evil + ".py", "line": 3}]
pickle.dump(d, open(sys.argv[2], "wb"), protocol=4)
PY
  "$cli" whatif "$tmp/evil.pickle" --config "" --html "$tmp/p.html" > /dev/null 2>&1 || bad "whatif --html"
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/prof" \
    --virtual-time-budget=10000 --dump-dom "file://$tmp/p.html" > "$tmp/dom.html" 2> "$tmp/console.log"
  grep -q pwned "$tmp/console.log" && bad "page: script from a frame ran"
  grep -q "<title>tcuda what-if</title>" "$tmp/dom.html" || bad "page: script from a frame changed the title"
  python3 - "$tmp/p.html" "$tmp/dom.html" <<'PY' || bad "page: the explain section does not show the document"
import html, json, re, sys
page, dom = open(sys.argv[1]).read(), open(sys.argv[2]).read()
doc = json.loads(re.search(r'<script id="whatif-data" type="application/json">(.*?)</script>', page, re.S).group(1))
st = json.loads(html.unescape(re.search(r'<pre id="whatif-status"[^>]*>(.*?)</pre>', dom, re.S).group(1)))
assert st.get("ok") is True, st
assert not re.search(r"<(img|iframe)\b", dom, re.I), "markup from a frame became an element"
sec = re.search(r'<div id="explain">(.*?)</div>\s*<h2>', dom, re.S).group(1)
tables = re.findall(r'<table class="explain">.*?<tbody>(.*?)</tbody>', sec, re.S)
ex = doc["explain"]
assert len(tables) == 2 + (ex["first_oom"] is not None), len(tables)
for body, at in zip(tables, (ex["peak_reserved"], ex["peak_allocated"])):
    trs = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    assert len(trs) == len(at["holders"]) + 2, (len(trs), len(at["holders"]))
    for tr, h in zip(trs, at["holders"]):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        assert int(cells[2]) == h["blocks"], (cells, h)
        assert cells[3] == "\n".join(h["frames"]) if h["frames"] else cells[3].startswith("("), (cells, h)
PY
else
  echo "page check skipped: no chromium"
fi
exit $fail
