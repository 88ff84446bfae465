#!/usr/bin/env bash
# tcuda whatif and tcuda replay --simulate SNAPSHOT on torch's recorded
# snapshots (tests/data/whatif): the CLI convention (help, exit 0/1/2,
# messages naming what was wrong), the refused pickle, replay's JSON array
# (one element per 'snapshot' entry and one for the end), and whatif's
# table, JSON and page. python3's json module reads the output; the
# committed snapshots are read with pickle only where the test counts their
# entries (the repository's own data).
set -u
cli=${TCUDA_CLI:?}
data=${TCUDA_TEST_DATA:?}/whatif
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

# ---- help ----
"$cli" whatif --help > "$tmp/out" 2> "$tmp/err" || bad "whatif --help exited $?"
grep -q "^usage: tcuda whatif SNAPSHOT" "$tmp/out" || bad "whatif --help: no usage on stdout"
grep -q -- "--config CONF" "$tmp/out" && grep -q -- "--html OUT" "$tmp/out" || bad "whatif --help lacks options"
[ -s "$tmp/err" ] && bad "whatif --help wrote to stderr"
"$cli" help whatif | grep -q "^usage: tcuda whatif" || bad "tcuda help whatif"
"$cli" --help | grep -q "^  whatif " || bad "tcuda --help does not list whatif"
"$cli" replay --help > "$tmp/out" || bad "replay --help"
grep -q "tcuda replay --simulate .*SNAPSHOT\|SNAPSHOT\$" "$tmp/out" || bad "replay --help: no snapshot synopsis"
grep -q "command line only" "$tmp/out" || bad "replay --help does not say where a snapshot's config comes from"

# ---- whatif: usage (2) against run-time (1) ----
run 2 "unknown option '--bogus'" whatif --bogus "$data/side_stream.pickle"
run 2 "no snapshot given" whatif
run 2 "unexpected argument" whatif "$data/side_stream.pickle" "$data/side_stream.pickle"
run 2 "--fraction 2" whatif --fraction 2 "$data/side_stream.pickle"
run 2 "--fraction 'half'" whatif --fraction half "$data/side_stream.pickle"
run 2 "--capacity 'lots'" whatif --capacity lots "$data/side_stream.pickle"
run 2 "--capacity '1MiB'" whatif --capacity 1MiB "$data/side_stream.pickle"
run 2 "--threads 0" whatif --threads 0 "$data/side_stream.pickle"
run 2 "--device -1" whatif --device -1 "$data/side_stream.pickle"
run 2 "--config 'bogus:1': unknown key 'bogus'" whatif --config bogus:1 "$data/side_stream.pickle"
run 2 "--html needs a file name" whatif --html "" "$data/side_stream.pickle"
run 2 "option '--html' needs a value" whatif "$data/side_stream.pickle" --html
run 1 "tcuda whatif: " whatif "$tmp/missing.pickle"
grep -qF "missing.pickle" "$tmp/err" || bad "missing file: the message does not name it: $(cat "$tmp/err")"
echo "not a snapshot" > "$tmp/text.txt"
run 1 "tcuda whatif: " whatif "$tmp/text.txt"
printf '{"segments": 3}' > "$tmp/notsnap.json"
run 1 "tcuda whatif: " whatif "$tmp/notsnap.json"
python3 -c "import pickle,os,sys; pickle.dump(os.system, open(sys.argv[1],'wb'))" "$tmp/evil.pickle"
run 1 "GLOBAL" whatif "$tmp/evil.pickle"
grep -q "refused" "$tmp/err" || bad "the refused pickle's message: $(cat "$tmp/err")"
run 1 "device 3" whatif --device 3 "$data/side_stream.pickle"
run 1 "nonexistent-dir" whatif --html /nonexistent-dir/p.html "$data/side_stream.pickle"
# the environment's allocator config is not a row's
TCUDA_ALLOC_CONF=bogus:1 PYTORCH_CUDA_ALLOC_CONF=bogus:1 run 0 "" whatif --config max_split_size_mb:128 "$data/side_stream.pickle"

# ---- replay --simulate SNAPSHOT ----
run 2 "snapshots replay only on the simulated device" replay "$data/side_stream.pickle"
[ -s "$tmp/out" ] && bad "replay of a snapshot without --simulate wrote to stdout"
run 2 "do not apply to a snapshot" replay --simulate --va driver "$data/side_stream.pickle"
run 2 "do not apply to a snapshot" replay --simulate --addresses "$tmp/a" "$data/side_stream.pickle"
run 2 "--config 'bogus:1'" replay --simulate --config bogus:1 "$data/side_stream.pickle"
run 2 "--fraction 1.5" replay --simulate --fraction 1.5 "$data/side_stream.pickle"
run 1 "GLOBAL" replay --simulate "$tmp/evil.pickle"
# for a snapshot, only --config sets the config: the environment is not read
TCUDA_ALLOC_CONF=bogus:1 run 0 "" replay --simulate "$data/side_stream.pickle"

run 0 "simulated device of 150109880320 bytes (an H200's; --capacity sets it)" \
  replay --simulate "$data/side_stream.pickle"
python3 - "$tmp/out" "$data/side_stream.pickle" <<'PY' || bad "replay --simulate side_stream.pickle: wrong array"
import json, pickle, sys
out = json.load(open(sys.argv[1]))
snap = pickle.load(open(sys.argv[2], "rb"))   # the repository's own test data
want = sum(e["action"] == "snapshot" for e in snap["device_traces"][0]) + 1
assert isinstance(out, list) and len(out) == want, (len(out), want)
for el in out:
    assert set(el) == {"stats", "segments"} and "reserved_bytes.all.current" in el["stats"], list(el)
print("replay --simulate side_stream.pickle:", len(out), "elements")
PY
run 0 "simulated device of 85899345920 bytes" replay --simulate --capacity 80GiB \
  --config expandable_segments:True "$data/side_stream.pickle"
python3 -c "import json,sys; assert len(json.load(open(sys.argv[1]))) > 1" "$tmp/out" || bad "replay --capacity output"
# JSON snapshots, also after leading blank lines, and the history of the replay
{ printf '\n  \n'; cat "$data/tf_default.json"; } > "$tmp/blank.json"
run 0 "" replay --simulate --history "$tmp/h.json" "$tmp/blank.json"
python3 -c "import json,sys; a=json.load(open(sys.argv[1])); h=json.load(open(sys.argv[2])); assert len(a) > 1 and h['segments'] is not None" \
  "$tmp/out" "$tmp/h.json" || bad "replay --history of a JSON snapshot"
# a replay that predicts OOMs succeeds and counts them
run 0 "" replay --simulate --fraction 0.002291207795694817 "$data/tf_limit.pickle"
python3 -c "import json,sys; s=json.load(open(sys.argv[1]))[-1]['stats']; assert s['num_ooms'] > 0, s['num_ooms']" \
  "$tmp/out" || bad "replay under tf_limit's fraction predicts no OOM"
# stdout that cannot be written: /dev/full, or where there is none (or
# TCUDA_TEST_NO_DEV_FULL is set) a file under a file-size limit of 0 (SIGXFSZ
# ignored, so every write fails; stderr goes through a pipe, not limited)
unwritable() {
  if [ -w /dev/full ] && [ -z "${TCUDA_TEST_NO_DEV_FULL:-}" ]; then "$cli" "$@" > /dev/full 2> "$tmp/err"; return; fi
  ( trap '' XFSZ; ulimit -f 0; "$cli" "$@" 2>&1 > "$tmp/full" ) | cat > "$tmp/err"
  return "${PIPESTATUS[0]}"
}
unwritable replay --simulate "$data/tf_default.pickle" && bad "replay of a snapshot to an unwritable stdout succeeded"
grep -q "tcuda replay: write error" "$tmp/err" || bad "replay to an unwritable stdout: $(cat "$tmp/err")"
unwritable whatif --config max_split_size_mb:128 "$data/side_stream.pickle" && bad "whatif to an unwritable stdout succeeded"
grep -q "tcuda whatif: write error" "$tmp/err" || bad "whatif to an unwritable stdout: $(cat "$tmp/err")"

# ---- whatif: JSON, table, page ----
run 0 "" whatif --json "$data/tf_default.pickle"
python3 - "$tmp/out" <<'PY' || bad "whatif --json tf_default.pickle"
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"snapshot", "configs", "recommended", "explain", "notes"}, list(d)
rows = d["configs"]
assert rows[0]["source"] == "recorded", rows[0]["source"]
assert len(rows) > 5 and all(r["source"] == "sweep" for r in rows[1:])
assert all("series" not in r for r in rows)
print("whatif --json:", len(rows), "rows; recommended", d["recommended"] and d["recommended"]["config"])
PY
cp "$tmp/out" "$tmp/default.json"
run 0 "" whatif --threads 1 "$data/tf_default.pickle"
python3 - "$tmp/out" "$tmp/default.json" <<'PY' || bad "whatif's table"
import json, re, sys
text, doc = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
lines = text.split("\n")
head = [i for i, l in enumerate(lines) if l.startswith("config ")]
assert len(head) == 1, "one header line"
for col in ("source", "peak reserved", "peak allocated", "ratio", "peak segments", "segment calls", "retries",
            "ooms", "first OOM", "min_limit"):
    assert col in lines[head[0]], col
body = lines[head[0] + 1: head[0] + 1 + len(doc["configs"])]
for line, row in zip(body, doc["configs"]):
    name = row["config"] or "(torch default)"
    name = name if len(name) <= 56 else name[:53] + "..."   # long ones are cut in the table
    assert line.startswith(name + " "), (line, name)
    assert " " + row["source"] + " " in line, (line, row["source"])
    assert re.search(r"\d+\.\d (KiB|MiB|GiB)", line), line
rec = doc["recommended"]
if rec:
    m = re.search(r"^recommended: (.*)$", text, re.M)
    assert m and m.group(1) == (rec["config"] or "(torch default)"), m and m.group(0)
    assert "%d bytes (%.2f%%)" % (rec["saving_bytes"], rec["saving_percent"]) in text.replace("\n  ", " ")
assert "notes:" in text
print("table ok:", len(body), "rows")
PY
# a long recorded config: whole on the header line, cut in the table
run 0 "" whatif --config max_split_size_mb:128 "$data/tf_rp2.pickle"
grep -q "^recorded with: roundup_power2_divisions:\[1:1,.*,32768:8\];" "$tmp/out" || bad "tf_rp2: the recorded config line"
grep -q "^roundup_power2_divisions:\[1:1,[^ ]*\.\.\.  recorded " "$tmp/out" || bad "tf_rp2: the recorded row's cut config"
run 0 "" whatif --json --config expandable_segments:True --config "" --config max_split_size_mb:64 \
  --capacity 80GiB --fraction 0.5 --device 0 "$data/side_stream.pickle"
python3 - "$tmp/out" <<'PY' || bad "whatif --config rows"
import json, sys
d = json.load(open(sys.argv[1]))
got = [(r["config"], r["source"]) for r in d["configs"]]
assert got[1:] == [("expandable_segments:True", "given"), ("", "given"), ("max_split_size_mb:64", "given")], got
assert d["snapshot"]["capacity"] == 80 << 30 and d["snapshot"]["fraction"] == 0.5
assert d["snapshot"]["limit"] == 40 << 30
PY
run 0 "tcuda whatif: wrote $tmp/p.html" whatif --html "$tmp/p.html" --config max_split_size_mb:64 \
  "$data/side_stream.pickle"
grep -q "^recommended\|^config " "$tmp/out" || bad "whatif --html did not print the table"
grep -q "Content-Security-Policy" "$tmp/p.html" || bad "the page has no Content-Security-Policy"
grep -q "@@NONCE@@\|@@DATA@@" "$tmp/p.html" && bad "the page kept a template marker"
# (the SVG namespace is a name, not a place)
grep -o 'https\?://[^"'"'"' <>]*' "$tmp/p.html" | grep -vx 'http://www.w3.org/2000/svg' \
  && bad "the page references the network"
run 0 "" whatif --json --html "$tmp/p2.html" --config max_split_size_mb:64 "$data/side_stream.pickle"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert all(len(r['series']['t_ms']) > 0 for r in d['configs'])" \
  "$tmp/out" || bad "whatif --json --html: no series in the document"

# ---- the default sweep's policy:compact row: present, never recommended ----
# kv_decoder: compact's min_limit (56 MiB) is below every torch config's
# (64 MiB at best), so a recommendation that did not skip it would pick it.
"$cli" whatif "$data/kv_decoder.pickle" --json > "$tmp/out" 2> "$tmp/err" || bad "whatif --json kv_decoder: exit $?"
python3 - "$tmp/out" << 'PY' || bad "whatif's policy:compact row"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["configs"] if r["config"] == "policy:compact"]
assert len(rows) == 1 and rows[0]["source"] == "sweep", rows
best = min(r["min_limit"] for r in d["configs"] if r["min_limit"] is not None)
assert rows[0]["min_limit"] == best, (rows[0]["min_limit"], best)
assert d["recommended"]["config"] != "policy:compact", d["recommended"]
PY
"$cli" whatif "$data/kv_decoder.pickle" > "$tmp/out" 2> "$tmp/err" || bad "whatif kv_decoder: exit $?"
grep -q "^with tcuda as torch's allocator (TCUDA_TORCH_ALLOCATOR=1 TCUDA_ALLOC_CONF=policy:compact): min_limit" \
  "$tmp/out" || bad "whatif's table lacks the policy:compact line"

[ $fail = 0 ] && echo "whatif_cli: all passed"
exit $fail
