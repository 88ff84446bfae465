#!/usr/bin/env bash
# tcuda whatif --html in headless Chromium: pages from torch's recorded
# snapshots render with no script error (the page writes its status into
# #whatif-status when done), with one table row per config of the embedded
# document, two chart paths per config (reserved and allocated), the
# recommendation naming its config and the first OOM's frames. Hostile text
# in a frame name (through the CLI's embedding) or a config string (put
# into the document directly: the CLI refuses such a config) shows as text
# and runs nothing. Exit 77 (skipped) without chromium or python3.
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}/whatif
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ] || ! command -v python3 >/dev/null; then echo "SKIPPED: chromium or python3 missing"; exit 77; fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
FRACTION=0.002291207795694817   # tf_limit's own: set_per_process_memory_fraction when it was recorded
EVIL='</script><img src=x onerror="document.title='"'"'pwned'"'"'"><script>document.title="pwned"</script>'

render() { # page -> DOM on stdout; console messages land in $W/console.log
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/prof" \
    --enable-logging=stderr --v=0 --virtual-time-budget=10000 --dump-dom "file://$1" 2>"$W/console.log"
}

# check PAGE DOM [hostile-text]: the rendered page against its own embedded document
check() {
  grep -E 'Uncaught|CONSOLE.*(Error|error)' "$W/console.log" && fail "console errors for $1"
  grep -q 'pwned' "$W/console.log" && fail "script from the data ran for $1"
  python3 - "$1" "$2" "${3:-}" <<'PY' || fail "rendered DOM of $1"
import html, json, re, sys
page, dom, evil = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
m = re.search(r'<script id="whatif-data" type="application/json">(.*?)</script>', page, re.S)
assert m, "no data block in the page"
doc = json.loads(m.group(1))
rows = doc["configs"]

def section(pattern):
    m = re.search(pattern, dom, re.S)
    assert m, "missing in the DOM: " + pattern
    return m.group(1)

def text(fragment):
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))

status = json.loads(html.unescape(section(r'<pre id="whatif-status"[^>]*>(.*?)</pre>')))
assert status.get("ok") is True, status
assert re.search(r'<pre id="whatif-status" hidden', dom), "the status line is visible on the page"
assert "console." not in open(sys.argv[1]).read(), "the page logs to the console"
# many rows: the recorded, recommended and compact rows shown, the others hidden
rec = doc["recommended"]
rec_i = next((i for i, r in enumerate(rows) if rec and r["config"] == rec["config"] and r["min_limit"] == rec["min_limit"]), -1)
main = sorted({0, rec_i} - {-1} | {i for i, r in enumerate(rows) if r["config"].startswith("policy:compact")})
want_shown = main if len(rows) > 6 else list(range(len(rows)))
assert status["shown"] == want_shown, (status["shown"], want_shown)
assert '<title>tcuda what-if</title>' in dom, "the title changed"
# no markup from the document became an element
for tag in re.findall(r"<(img|iframe|object|embed)\b", dom, re.I):
    raise AssertionError("a <%s> element in the DOM" % tag)
# one table row per config, in order, with its name
body = section(r'<table id="rows">.*?<tbody>(.*?)</tbody>')
trs = re.findall(r'<tr data-row="(\d+)"[^>]*>(.*?)</tr>', body, re.S)
assert [int(i) for i, _ in trs] == list(range(len(rows))), (len(trs), len(rows))
for (_, tr), r in zip(trs, rows):
    cells = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
    assert len(cells) == 11, cells
    assert cells[0].startswith(r["config"] or "(torch default)"), (cells[0], r["config"])
    assert cells[1] == r["source"], cells
    assert cells[8] == str(r["ooms"]), cells
    assert (cells[9] == "-") == (r["first_oom"] is None), cells
# the chart: one path per config per series
svg = section(r'<svg id="chart"[^>]*>(.*?)</svg>')
paths = re.findall(r"<path\b[^>]*>", svg)
got = sorted((int(re.search(r'data-row="(\d+)"', p).group(1)), re.search(r'data-series="(\w+)"', p).group(1))
             for p in paths)
want = sorted((i, k) for i in range(len(rows)) for k in ("reserved", "allocated"))
assert got == want, (len(got), len(want))
assert all(re.search(r'\bd="M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+"', p) for p in paths), "a path without points"
visible = sorted({int(re.search(r'data-row="(\d+)"', p).group(1)) for p in paths if "display: none" not in p})
assert visible == want_shown, (visible, want_shown)
# a band from each point's minimum to its maximum, per config and series
bands = re.findall(r"<polygon\b[^>]*>", svg)
got = sorted((int(re.search(r'data-row="(\d+)"', p).group(1)), re.search(r'data-band="(\w+)"', p).group(1)) for p in bands)
assert got == want, (len(got), len(want))
assert sorted({int(re.search(r'data-row="(\d+)"', p).group(1)) for p in bands if "display: none" not in p}) == want_shown
for r in rows:
    ser = r["series"]
    for k in ("reserved", "allocated"):
        assert len(ser[k + "_min"]) == len(ser[k]) and all(a <= b for a, b in zip(ser[k + "_min"], ser[k])), k
offs = sorted(int(i) for i in re.findall(r'<span class="lg off" data-row="(\d+)"', dom))
assert offs == sorted(set(range(len(rows))) - set(want_shown)), offs
assert status["lines"] == len(want), status
# legend: one entry per config
legend = section(r'<div id="legend">(.*?)</div>\s*<div class="lg-actions">')
assert len(re.findall(r'<span class="lg', legend)) == len(rows), "legend entries"
# the recommendation names its config
rec_text = text(section(r'<div id="recommendation"[^>]*>(.*?)</div>'))
if doc["recommended"]:
    assert "Recommended: " + (doc["recommended"]["config"] or "(torch default)") in rec_text, rec_text
else:
    assert rec_text.startswith("No recommendation"), rec_text
# the first OOM: the first row whose first OOM has frames, else the first with an OOM
oom_rows = [i for i, r in enumerate(rows) if r["first_oom"]]
framed = [i for i in oom_rows if rows[i]["first_oom"]["frames"]]
sel = framed[0] if framed else oom_rows[0] if oom_rows else -1
assert status["selected"] == sel, (status["selected"], sel)
title = text(section(r'<div id="oom-title">(.*?)</div>\s*<ol'))
frames_dom = section(r'<ol id="oom-frames">(.*?)</ol>')
lis = [text(li) for li in re.findall(r"<li>(.*?)</li>", frames_dom, re.S)]
if sel < 0:
    assert title == "No row runs out of memory.", title
    assert not lis
else:
    o = rows[sel]["first_oom"]
    assert "request #%d" % o["request"] in title, title
    assert len(lis) == len(o["frames"]), (len(lis), len(o["frames"]))
    for li, f in zip(lis, o["frames"]):
        assert li.startswith(f["name"]) and f["filename"] in li and li.endswith(":%d" % f["line"]), (li, f)
if evil:
    assert evil in text(dom), "the hostile text is not shown as text"
print("%s: %d rows, %d paths, first OOM row %d with %d frames, recommended %r" %
      (sys.argv[1].rsplit("/", 1)[-1], len(rows), len(paths), sel, len(lis),
       doc["recommended"] and doc["recommended"]["config"]))
PY
}

# ---- tf_limit under its recorded fraction: every row has a first OOM ----
"$CLI" whatif --fraction "$FRACTION" --html "$W/limit.html" "$DATA/tf_limit.pickle" > "$W/limit.txt" 2>"$W/err" \
  || fail "whatif --html tf_limit: $(cat "$W/err")"
grep -q "^recommended" "$W/limit.txt" || fail "whatif --html printed no table"
grep -q "Content-Security-Policy" "$W/limit.html" || fail "no Content-Security-Policy in the page"
grep -o 'https\?://[^"'"'"' <>]*' "$W/limit.html" | grep -vx 'http://www.w3.org/2000/svg' \
  && fail "the page references the network"
render "$W/limit.html" > "$W/limit.dom" || fail "chromium failed on the tf_limit page"
check "$W/limit.html" "$W/limit.dom"

# ---- tf_default: no OOM anywhere ----
"$CLI" whatif --html "$W/default.html" "$DATA/tf_default.pickle" > /dev/null 2>"$W/err" \
  || fail "whatif --html tf_default: $(cat "$W/err")"
render "$W/default.html" > "$W/default.dom" || fail "chromium failed on the tf_default page"
check "$W/default.html" "$W/default.dom"

# ---- 19 rows: the chart shows the main ones, the legend has all ----
confs=()
for c in expandable_segments:True max_split_size_mb:64 max_split_size_mb:128 max_split_size_mb:256 \
         max_split_size_mb:512 roundup_power2_divisions:2 roundup_power2_divisions:4 roundup_power2_divisions:8 \
         garbage_collection_threshold:0.6 garbage_collection_threshold:0.8 policy:compact \
         expandable_segments:True,roundup_power2_divisions:4 max_split_size_mb:128,roundup_power2_divisions:4 \
         expandable_segments:True,max_split_size_mb:256 max_split_size_mb:1024 roundup_power2_divisions:16 \
         garbage_collection_threshold:0.7 max_split_size_mb:2048; do confs+=(--config "$c"); done
"$CLI" whatif "${confs[@]}" --fraction 0.5 --html "$W/many.html" "$DATA/tf_default.pickle" > /dev/null 2>"$W/err" \
  || fail "whatif --html with 18 configs: $(cat "$W/err")"
render "$W/many.html" > "$W/many.dom" || fail "chromium failed on the 19-row page"
check "$W/many.html" "$W/many.dom"
python3 -c 'import json,re,sys; d=json.loads(re.search(r"<script id=\"whatif-data\" type=\"application/json\">(.*?)</script>", open(sys.argv[1]).read(), re.S).group(1)); assert len(d["configs"]) == 19, len(d["configs"])' "$W/many.html" || fail "not 19 rows"

# ---- frames with a hostile name, through the CLI's embedding ----
# tf_limit as JSON, with the frames of its later OOMs (and a hostile name)
# also on the first one, so the first OOM of the replay has a stack
python3 - "$DATA/tf_limit.pickle" "$W/framed.json" "$EVIL" <<'PY' || fail "making the framed snapshot"
import json, pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))   # the repository's own test data
ooms = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
frames = next(e["frames"] for e in ooms if e["frames"])
evil = {"name": sys.argv[3], "filename": "/x/" + sys.argv[3] + ".py", "line": 7}
for e in ooms:
    e["frames"] = [evil] + frames
json.dump(snap, open(sys.argv[2], "w"))
PY
"$CLI" whatif --fraction "$FRACTION" --config max_split_size_mb:64 --html "$W/framed.html" "$W/framed.json" \
  > /dev/null 2>"$W/err" || fail "whatif --html framed.json: $(cat "$W/err")"
grep -q '</script><img' "$W/framed.html" && fail "the hostile frame name reached the page unescaped"
render "$W/framed.html" > "$W/framed.dom" || fail "chromium failed on the framed page"
check "$W/framed.html" "$W/framed.dom" "$EVIL"

# ---- a hostile config string, put into a page's document ----
python3 - "$W/limit.html" "$W/evilcfg.html" "$EVIL" <<'PY' || fail "making the hostile-config page"
import json, re, sys
page, evil = open(sys.argv[1]).read(), sys.argv[3]
m = re.search(r'(<script id="whatif-data" type="application/json">)(.*?)(</script>)', page, re.S)
doc = json.loads(m.group(2))
doc["configs"][1]["config"] = evil
doc["recommended"] = {"config": evil, "min_limit": doc["configs"][1]["min_limit"] or 0,
                      "saving_bytes": 0, "saving_percent": 0.0}
doc["configs"][1]["min_limit"] = doc["recommended"]["min_limit"]
doc["notes"].append(evil)
data = json.dumps(doc).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
open(sys.argv[2], "w").write(page[:m.start(2)] + data + page[m.end(2):])
PY
render "$W/evilcfg.html" > "$W/evilcfg.dom" || fail "chromium failed on the hostile-config page"
check "$W/evilcfg.html" "$W/evilcfg.dom" "$EVIL"

# ---- clicks: a legend entry hides its config's lines, a table row shows its
# first OOM, the x-axis switch redraws (the clicks are added to the page's
# own script, the only one its policy runs) ----
python3 - "$W/limit.html" "$W/clicks.html" <<'PY' || fail "making the clicked page"
import sys
page = open(sys.argv[1]).read()
end = page.rindex("})();")
clicks = ("document.querySelectorAll('#legend .lg')[1].click();\n"
          "document.querySelectorAll('#rows tbody tr')[3].click();\n"
          "document.getElementById('x-time').click();\n")
open(sys.argv[2], "w").write(page[:end] + clicks + page[end:])
PY
render "$W/clicks.html" > "$W/clicks.dom" || fail "chromium failed on the clicked page"
grep -E 'Uncaught|CONSOLE.*(Error|error)' "$W/console.log" && fail "console errors after the clicks"
python3 - "$W/clicks.dom" "$W/clicks.html" <<'PY' || fail "the clicks did not act"
import html, json, re, sys
dom = open(sys.argv[1]).read()
doc = json.loads(re.search(r'<script id="whatif-data" type="application/json">(.*?)</script>',
                           open(sys.argv[2]).read(), re.S).group(1))
paths = re.findall(r"<path\b[^>]*>", dom)
rows = doc["configs"]; rec = doc["recommended"]
rec_i = next((i for i, r in enumerate(rows) if rec and r["config"] == rec["config"] and r["min_limit"] == rec["min_limit"]), -1)
main = {0, rec_i} - {-1} | {i for i, r in enumerate(rows) if r["config"].startswith("policy:compact")}
assert len(rows) > 6
# shown at first: the main rows; the click toggles entry 1
want = (set(range(len(rows))) - main) ^ {1}
hidden = {int(re.search(r'data-row="(\d+)"', p).group(1)) for p in paths if "display: none" in p}
assert hidden == want, (hidden, want)
was_off = 1 not in main
assert bool(re.search(r'<span class="lg off" data-row="1"', dom)) != was_off, "legend entry 1 not toggled"
assert re.search(r'<tr data-row="3" class="[^"]*\bsel\b', dom), "row 3 not selected"
title = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<div id="oom-title">(.*?)</div>\s*<ol', dom, re.S).group(1)))
assert title.startswith("Row " + (doc["configs"][3]["config"] or "(torch default)")), title
assert re.search(r'<button type="button" id="x-time" class="on">', dom), "the time axis is not on"
assert "time since the first entry of the history" in dom
print("clicks ok")
PY

# ---- a fresh script nonce per page ----
"$CLI" whatif --config max_split_size_mb:64 --html "$W/n1.html" "$DATA/side_stream.pickle" > /dev/null 2>&1
"$CLI" whatif --config max_split_size_mb:64 --html "$W/n2.html" "$DATA/side_stream.pickle" > /dev/null 2>&1
n1=$(grep -o "nonce-[0-9a-f]*" "$W/n1.html" | head -1); n2=$(grep -o "nonce-[0-9a-f]*" "$W/n2.html" | head -1)
[ ${#n1} -eq 38 ] && [ "$n1" != "$n2" ] || fail "script nonce not fresh: '$n1' '$n2'"
grep -q "<script nonce=\"${n1#nonce-}\">" "$W/n1.html" || fail "the page's script does not carry its nonce"
[ -n "${TCUDA_WHATIF_KEEP:-}" ] && cp "$W/limit.html" "$W/framed.html" "$TCUDA_WHATIF_KEEP/"
echo "ok"
