#!/usr/bin/env python3
"""Check what `tcuda whatif` concludes from the recorded PyTorch snapshots.

Usage: check_whatif_advice.py TCUDA_CLI DATA_DIR

DATA_DIR is tests/data/whatif: NAME.pickle recorded by torch 2.11 on an
H200 and NAME.stats.json with torch's own memory_stats() and the run's
limit (scripts/record_torch_histories.py). Checks, each against torch's
figures or the recorded limit:

  limit      without --fraction, a history with OOMs (tf_limit, cnn_limit,
             tf_at_limit) runs under a limit inferred from it: the range
             given holds the recorded limit, and the recorded row has
             torch's OOM count, peak reserved and retries; with every OOM's
             device_free too small for it, a warning and no limit.
  advice     the recorded config fails even on the whole device (a device
             smaller than its min_limit) while others fit: they are
             recommended; both recommendations are lines to set, with the
             recorded settings in, never worse than the recorded config on
             min_limit or peak reserved, and the choice the rules make
             (docs/whatif.md).
  min_limit  a property of (history, config): the same with and without
             --fraction and whatever --threads; never above a limit the row
             ran under with no OOM (tf_gc under its recorded limit).
  same       text, JSON, --html and --threads 1 or 2 give the same numbers
             on every snapshot.
  trunc      tf_trunc: the advice that rests on the lost prefix is withheld.
  text       0.6, not 0.59999999999999998; no negative byte counts; "1 OOM",
             not "1 OOMs"; each note on one line; the header's OOM count is
             the recorded row's, or the difference is said.

Prints one line per check and exits 1 if any failed.
"""
import glob
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

MIB = 1 << 20
FAILED = []


def check(name, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail and not ok else ""))
    if not ok:
        FAILED.append(name)


def run(cli, args, text=False):
    p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s %s: exit %d: %s" % (cli, " ".join(args), p.returncode, p.stderr.strip()[-500:]))
    return p.stdout if text else json.loads(p.stdout)


def stats(data, name):
    with open(os.path.join(data, name + ".stats.json")) as fh:
        return json.load(fh)


def frac(meta):
    return repr(meta["fraction"])


def numbers(doc):
    """Every figure of every row, without the chart's series."""
    return [{k: v for k, v in r.items() if k != "series"} for r in doc["configs"]]


def check_limit(cli, data):
    for name in ("tf_limit", "cnn_limit", "tf_at_limit"):
        st = stats(data, name)
        meta, want = st["meta"], st.get("end") or {}
        doc = run(cli, ["whatif", "--json", "--config", "", os.path.join(data, name + ".pickle")])
        snap, r0 = doc["snapshot"], doc["configs"][0]
        lim = snap.get("recorded_limit")
        check("limit %s: inferred" % name, snap.get("limit_source") == "inferred" and lim is not None, str(snap))
        if not lim:
            continue
        check("limit %s: the range [%d, %d] holds the recorded %d" % (name, lim["low"], lim["high"], meta["limit"]),
              lim["low"] <= meta["limit"] <= lim["high"])
        torch_ooms = want.get("num_ooms", meta.get("result", {}).get("num_ooms"))
        torch_pr = want.get("reserved_bytes.all.peak", meta.get("result", {}).get("peak_reserved"))
        check("limit %s: the recorded row's OOMs %d, torch %d" % (name, r0["ooms"], torch_ooms), r0["ooms"] == torch_ooms)
        check("limit %s: peak reserved %d, torch %d" % (name, r0["peak_reserved"], torch_pr),
              r0["peak_reserved"] == torch_pr)
        if "num_alloc_retries" in want:
            check("limit %s: retries %d, torch %d" % (name, r0["retries"], want["num_alloc_retries"]),
                  r0["retries"] == want["num_alloc_retries"])
        check("limit %s: no OOM retry taken for an empty_cache" % name, snap["inferred_empty_cache"] == 0,
              str(snap["inferred_empty_cache"]))
    # every OOM with too little device_free for it: the device was full, no limit can be inferred
    with open(os.path.join(data, "tf_limit.pickle"), "rb") as fh:
        snap = pickle.load(fh)  # the test's own committed data, recorded by torch
    for tr in snap["device_traces"]:
        for e in tr:
            if e["action"] == "oom":
                e["device_free"] = 2 * MIB
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "full.json")
        with open(path, "w") as fh:
            json.dump(snap, fh)
        doc = run(cli, ["whatif", "--json", "--config", "", path])
        text = run(cli, ["whatif", "--config", "", path], text=True)
    check("limit: device full -> no limit, a warning", doc["snapshot"]["recorded_limit"] is None and
          "no limit could be inferred" in (doc["snapshot"]["limit_warning"] or "") and
          "no limit could be inferred" in text, str(doc["snapshot"]))


def rows_by_config(doc):
    return {r["config"]: r for r in doc["configs"][1:]}


def no_worse(r, r0, goal):
    if r0["min_limit"] is not None and (r["min_limit"] is None or r["min_limit"] > r0["min_limit"]):
        return False
    key = "peak_reserved_no_limit" if goal == "fit" else "peak_reserved"
    r0_oom = r0["ooms"] > 0 or r0["first_oom"] is not None
    if (goal == "fit" or not r0_oom) and r[key] > r0[key]:
        return False
    return True


def expected_advice(doc, goal):
    """The rules of docs/whatif.md, section 3, applied to the rows."""
    rows, r0 = doc["configs"], doc["configs"][0]
    cand = [r for r in rows if not r["config"].startswith("policy:") and "policy:" not in r["config"]
            and no_worse(r, r0, goal)]
    if goal == "fit":
        cand = [r for r in cand if r["min_limit"] is not None]
        if not cand:
            return None
        floor = min(r["min_limit"] for r in cand)
        cand = [r for r in cand if r["min_limit"] <= floor + 2 * MIB]
        return min(cand, key=lambda r: (r["peak_reserved_no_limit"], r["min_limit"], r["source"] != "recorded",
                                        r["retries"], r["segment_calls"]))
    cand = [r for r in cand if r["ooms"] == 0 and r["first_oom"] is None]
    if not cand:
        return None
    big = 1 << 64
    return min(cand, key=lambda r: (r["peak_reserved"], r["min_limit"] if r["min_limit"] is not None else big,
                                    r["source"] != "recorded", r["retries"], r["segment_calls"]))


def check_advice(cli, data):
    # a device smaller than the recorded config's min_limit but not the expandable one's
    doc = run(cli, ["whatif", "--json", "--capacity", str(480 * MIB), os.path.join(data, "tf_default.pickle")])
    r0 = doc["configs"][0]
    fits = [r for r in doc["configs"][1:] if r["min_limit"] is not None and not r["config"].startswith("policy:")]
    check("advice: recorded config has no min_limit on a 480 MiB device, %d others have" % len(fits),
          r0["min_limit"] is None and fits, str(r0["min_limit"]))
    rec = doc.get("recommended")
    check("advice: still a recommendation to fit", rec is not None and rec["config"] in [r["config"] for r in fits],
          str(rec))
    for name in sorted(os.path.basename(p)[:-7] for p in glob.glob(os.path.join(data, "*.pickle"))):
        doc = run(cli, ["whatif", "--json", os.path.join(data, name + ".pickle")])
        rc = doc["snapshot"]["recorded_config"]
        for key, goal in (("recommended", "fit"), ("recommended_reserved", "hold")):
            rec = doc.get(key)
            if doc["snapshot"]["truncated"]:
                continue  # checked by check_trunc
            want = expected_advice(doc, goal)
            got = rec and [r for r in doc["configs"] if r["config"] == rec["config"]][0]
            check("advice %s %s: %s" % (name, goal, rec and rec["config"]),
                  (want is None and rec is None) or (want is not None and rec is not None and
                                                      want["config"] == rec["config"]),
                  "expected %s" % (want and want["config"]))
            if not rec:
                continue
            check("advice %s %s: the line to set" % (name, goal), rec["setting"] == "PYTORCH_CUDA_ALLOC_CONF=" + rec["config"],
                  rec["setting"])
            # the recorded settings are in it, unless the advice sets the same key, or is torch's defaults
            keys = {i.split(":")[0] for i in re.split(r",(?![^\[]*\])", rec["config"]) if i}
            kept = [i for i in re.split(r",(?![^\[]*\])", rc) if i and i.split(":")[0] not in keys]
            check("advice %s %s: recorded settings merged in" % (name, goal),
                  rec["config"] == "" or all(i in rec["config"] for i in kept), "%r in %r" % (kept, rec["config"]))
            check("advice %s %s: no worse than the recorded config" % (name, goal),
                  no_worse(got, doc["configs"][0], goal))


def check_min_limit(cli, data):
    st = stats(data, "tf_gc")
    path = os.path.join(data, "tf_gc.pickle")
    a = run(cli, ["whatif", "--json", path])
    b = run(cli, ["whatif", "--json", "--fraction", frac(st["meta"]), path])
    lim = st["meta"]["limit"]
    r = b["configs"][0]
    check("min_limit tf_gc: %s under the recorded limit %d it ran under with %d OOMs" % (r["min_limit"], lim, r["ooms"]),
          r["ooms"] == 0 and r["min_limit"] is not None and r["min_limit"] <= lim)
    for name in ("tf_gc", "tf_limit", "cnn_limit", "tf_default", "tf_trunc", "side_stream", "unet"):
        path = os.path.join(data, name + ".pickle")
        docs = [run(cli, ["whatif", "--json"] + extra + [path]) for extra in
                ([], ["--fraction", "0.0034"], ["--fraction", "0.0035"], ["--fraction", "0.005", "--threads", "1"])]
        by = [{r["config"]: r for r in d["configs"][1:]} for d in docs]
        diff = ["%r: %s" % (c, [d[c]["min_limit"] for d in by if c in d]) for c in by[0]
                if len({d[c]["min_limit"] for d in by if c in d}) > 1]
        check("min_limit %s: the same with no limit, --fraction 0.0034, 0.0035 and 0.005" % name, not diff, "; ".join(diff))
        for d in docs:
            under = [r["config"] for r in d["configs"] if r["min_limit"] is not None and
                     not r["min_limit"] <= r["min_limit_bisected"]]
            check("min_limit %s: at most min_limit_bisected" % name, not under, str(under))
            lim = d["snapshot"]["limit"]
            over = ["%r %d > %d" % (r["config"], r["min_limit"], lim) for r in d["configs"]
                    if lim and r["ooms"] == 0 and r["first_oom"] is None and r["min_limit"] is not None
                    and r["min_limit"] > lim]
            check("min_limit %s: never above the limit %s a row ran under with no OOM" % (name, lim), not over,
                  "; ".join(over))


def human(b):
    if b < 1024:
        return "%d B" % b
    v, u = b / 1024.0, 0
    while v >= 1024 and u < 4:
        v, u = v / 1024.0, u + 1
    return "%.1f %s" % (v, ["KiB", "MiB", "GiB", "TiB", "PiB"][u])


def check_same(cli, data):
    with tempfile.TemporaryDirectory() as tmp:
        for p in sorted(glob.glob(os.path.join(data, "*.pickle"))):
            name = os.path.basename(p)[:-7]
            base = run(cli, ["whatif", "--json", p])
            page = os.path.join(tmp, "p.html")
            variants = {"--html": run(cli, ["whatif", "--json", "--html", page, p]),
                        "--threads 1": run(cli, ["whatif", "--json", "--threads", "1", p]),
                        "--threads 2": run(cli, ["whatif", "--json", "--threads", "2", p])}
            # the page holds the document the page was made from
            html = open(page).read()
            m = re.search(r'<script[^>]*type="application/json"[^>]*>(.*?)</script>', html, re.S)
            if m:
                variants["page"] = json.loads(m.group(1))
            for tag, d in variants.items():
                bad = [(a["config"], k, a[k], b.get(k)) for a, b in zip(numbers(base), numbers(d)) for k in a
                       if a[k] != b.get(k)]
                same = not bad and {k: v for k, v in d.items() if k != "configs"} == \
                    {k: v for k, v in base.items() if k != "configs"}
                check("same %s: JSON and %s" % (name, tag), same, str(bad[:3]))
            text = run(cli, ["whatif", p], text=True)
            bad = []
            for r in base["configs"]:
                cells = [human(r["peak_reserved"]), human(r["peak_allocated"]), str(r["peak_segments"]),
                         str(r["segment_calls"]), str(r["retries"]), str(r["ooms"]),
                         human(r["min_limit"]) if r["min_limit"] is not None else "none"]
                line = re.compile(r"\s+".join(re.escape(c) for c in cells[:2]) + r"\s+\S+\s+" +
                                  r"\s+".join(re.escape(c) for c in cells[2:6]))
                if not line.search(text) or cells[6] not in text:
                    bad.append(r["config"])
            check("same %s: JSON and the text table" % name, not bad, str(bad))


def check_trunc(cli, data):
    doc = run(cli, ["whatif", "--json", os.path.join(data, "tf_trunc.pickle")])
    check("trunc: advice on peak reserved withheld", doc.get("recommended_reserved") is None and
          bool(doc.get("recommendation_withheld")), str(doc.get("recommendation_withheld")))
    check("trunc: says whether the window holds the peak", "window_holds_peak" in doc["snapshot"])


def check_text(cli, data):
    text = run(cli, ["whatif", os.path.join(data, "tf_gc.pickle")], text=True)
    check("text: 0.6 as written", "0.59999" not in text and "garbage_collection_threshold:0.6" in text)
    for name in ("tf_limit", "cnn_limit", "side_stream", "tf_trunc", "tf_default"):
        for extra in ([], ["--fraction", "0.003"]):
            path = os.path.join(data, name + ".pickle")
            text = run(cli, ["whatif"] + extra + [path], text=True)
            doc = run(cli, ["whatif", "--json"] + extra + [path])
            tag = "%s%s" % (name, " " + " ".join(extra) if extra else "")
            check("text %s: no negative byte count" % tag, not re.search(r"-\d+ bytes", text))
            check("text %s: singular after 1" % tag,
                  not re.search(r"\b1 (OOMs|calls|entries|requests|bytes)\b", text), text[:300])
            notes = doc["notes"]
            check("text %s: each note on one line" % tag,
                  all(("  - " + n) in text.split("\n") for n in notes))
            m = re.search(r"torch had (\d+) OOM", text)
            rooms = doc["configs"][0]["ooms"]
            check("text %s: header and recorded row agree on OOMs" % tag,
                  m and (int(m.group(1)) == rooms or
                         ("the recorded row has %d OOM" % rooms) in text))


def main(argv):
    cli, data = argv[1], argv[2]
    for f in (check_limit, check_advice, check_min_limit, check_same, check_trunc, check_text):
        try:
            f(cli, data)
        except Exception as e:  # a crash of one group is a failure, the others still run
            check(f.__name__, False, "%s: %s" % (type(e).__name__, e))
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
