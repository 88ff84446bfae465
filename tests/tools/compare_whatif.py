#!/usr/bin/env python3
"""Check tcuda's replay of PyTorch snapshots against what torch itself did.

Usage: compare_whatif.py TCUDA_CLI DATA_DIR [NAME ...]

DATA_DIR holds NAME.pickle (torch.cuda.memory._dump_snapshot) and
NAME.stats.json (torch.cuda.memory_stats() taken at each 'snapshot' entry and
at the dump, with the run's config and limit), recorded on an H200 by
scripts/record_torch_histories.py. Checks, each against torch's own figures:

  replay    `tcuda replay --simulate NAME.pickle` (with the run's memory
            fraction): every memory_stats key at every snapshot entry and at
            the end. For a truncated history, the keys the replay reports
            (the others are null), and peaks bounded from both sides: no
            higher than torch's, no lower than torch's current values so
            far, and equal to torch's once torch's peak rose between two
            snapshot entries (the window saw it).
  predict   `tcuda whatif tf_default.pickle --config B`: peak reserved, peak
            allocated, peak segments and retries equal those of torch's own
            run under B (tf_expandable, tf_msplit128, tf_rp2, tf_gc with its
            limit, cnn_expandable from cnn_default).
  first_oom `tcuda whatif BASE.pickle --fraction F`: the first request that
            fails is the first OOM torch raised under F (tf_limit, cnn_limit,
            and tf_at_limit: 2 MiB under the transformer's min_limit, where
            the run ended at its first OOM; for it only the end figures are
            known, and the replay of its own history must give them).

Prints one line per check and exits 1 if any failed.

       compare_whatif.py --keys TCUDA_CLI DATA_DIR NAME ...
  For each NAME, how far its replay is from torch's figures rather than
  where it first differs: at each snapshot entry and at the end, how many
  memory_stats keys are equal, and the differing keys at the first
  checkpoint that has any and at the end. Always exits 0.
"""
import json
import os
import subprocess
import sys

# names whose replay is known to differ, with the reason printed (not hidden)
KNOWN = {}


def run(cli, args):
    p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s %s: exit %d: %s" % (cli, " ".join(args), p.returncode, p.stderr.strip()[-500:]))
    return json.loads(p.stdout)


def load(data, name):
    with open(os.path.join(data, name + ".stats.json")) as fh:
        return json.load(fh)


def frac_args(meta):
    return ["--fraction", repr(meta["fraction"])] if meta.get("fraction") else []


def check_replay(cli, data, name):
    st = load(data, name)
    if "checkpoints" not in st:  # a run recorded by --run: only its end result is known
        r = st["meta"]["result"]
        doc = run(cli, ["whatif", "--json", "--config", st["meta"]["conf"]] + frac_args(st["meta"]) +
                  [os.path.join(data, name + ".pickle")])
        got = doc["configs"][0]
        bad = ["%s %s, torch %s" % (k, got[g], r[k]) for k, g in (("peak_reserved", "peak_reserved"),
               ("peak_allocated", "peak_allocated"), ("num_ooms", "ooms")) if got[g] != r[k]]
        return "; ".join(bad) or None
    got = run(cli, ["replay", "--simulate"] + frac_args(st["meta"]) + [os.path.join(data, name + ".pickle")])
    want = st["checkpoints"] + [st["end"]]
    if len(got) != len(want):
        return "%d elements, torch took %d snapshots (+ the end)" % (len(got), len(st["checkpoints"]))
    meta = st["meta"]
    truncated = meta["entries"][0] >= meta["max_entries"]  # torch's ring buffer was full
    seen_rise = set()  # peaks that rose inside the window: exact from then on
    for i, (g, w) in enumerate(zip(got, want)):
        where = "end" if i == len(want) - 1 else "snapshot %d" % i
        for k in sorted(w):
            if k not in g["stats"]:
                return "%s: key %s missing" % (where, k)
            gv = g["stats"][k]
            cumulative = k.startswith("num_") or k.endswith(".allocated") or k.endswith(".freed")
            if gv is None and not (truncated and cumulative):
                return "%s: %s is null" % (where, k)
            if truncated and cumulative:
                if gv is not None:
                    return "%s: %s = %s, but the history's start was lost" % (where, k, gv)
                continue
            if truncated and k.endswith(".peak"):
                # torch's peak may lie before the window, which the replay
                # never saw; its current values it did see
                if i and w[k] > want[i - 1][k]:
                    seen_rise.add(k)
                if k in seen_rise:
                    if gv != w[k]:
                        return "%s: %s = %s, torch %s (torch's peak rose inside the window)" % (where, k, gv, w[k])
                    continue
                floor = max([c.get(k[:-5] + ".current", 0) for c in want[:i + 1]])
                if gv > w[k] or gv < floor:
                    return "%s: %s = %d outside [%d, %d] (torch's current values so far, torch's peak)" % (
                        where, k, gv, floor, w[k])
                continue
            if gv != w[k]:
                return "%s: %s = %s, torch %s" % (where, k, gv, w[k])
    return None


def row_for(doc, conf):
    for r in doc["configs"][1:]:
        if r["config"] == conf:
            return r
    raise RuntimeError("no row for %r" % conf)


def check_predict(cli, data, base, name):
    st = load(data, name)
    conf = st["meta"]["conf"]
    doc = run(cli, ["whatif", "--json", "--config", conf] + frac_args(st["meta"]) +
              [os.path.join(data, base + ".pickle")])
    r, e = row_for(doc, conf), st["end"]
    pairs = [("peak_reserved", "reserved_bytes.all.peak"), ("peak_allocated", "allocated_bytes.all.peak"),
             ("peak_segments", "segment.all.peak"), ("retries", "num_alloc_retries")]
    bad = ["%s %d, torch %d" % (a, r[a], e[b]) for a, b in pairs if r[a] != e[b]]
    return "; ".join(bad) or None


def first_oom_request(data, name):
    import pickle  # the test's own committed data, recorded by torch
    with open(os.path.join(data, name + ".pickle"), "rb") as fh:
        snap = pickle.load(fh)
    req = 0
    for e in snap["device_traces"][0]:
        if e["action"] == "oom":
            return req
        if e["action"] == "alloc":
            req += 1
    return None


def check_first_oom(cli, data, base, name):
    st = load(data, name)
    want = first_oom_request(data, name)
    doc = run(cli, ["whatif", "--json", "--config", st["meta"]["conf"]] + frac_args(st["meta"]) +
              [os.path.join(data, base + ".pickle")])
    got = row_for(doc, st["meta"]["conf"])["first_oom"]
    if want is None:
        return "torch's run has no OOM" if got else None
    if not got or got["request"] != want:
        return "first_oom %s, torch's first OOM was request %d" % (got and got["request"], want)
    return None


def count_keys(cli, data, name):
    st = load(data, name)
    got = run(cli, ["replay", "--simulate"] + frac_args(st["meta"]) + [os.path.join(data, name + ".pickle")])
    want = st["checkpoints"] + [st["end"]]
    if len(got) != len(want):
        print("%s: %d elements, torch took %d snapshots (+ the end)" % (name, len(got), len(st["checkpoints"])))
    rows, first = [], None
    for i, (g, w) in enumerate(zip(got, want)):
        bad = sorted(k for k in w if g["stats"].get(k) != w[k])
        rows.append("%d/%d" % (len(w) - len(bad), len(w)))
        if bad and first is None:
            first = (i, bad, g, w)
    print("%s: keys equal per checkpoint (the last is the end): %s" % (name, " ".join(rows)))
    for label, item in (("first differing", first), ("end", (len(rows) - 1, None, got[-1], want[-1]))):
        if item is None or (label == "end" and first and first[0] == item[0]):
            continue
        i, bad, g, w = item
        bad = bad if bad is not None else sorted(k for k in w if g["stats"].get(k) != w[k])
        if bad:
            print("  %s checkpoint %d: %s" % (label, i, "; ".join(
                "%s %s, torch %s" % (k, g["stats"].get(k), w[k]) for k in bad)))


def main(argv):
    if argv[1:2] == ["--keys"] and len(argv) >= 5:
        for name in argv[4:]:
            try:
                count_keys(argv[2], argv[3], name)
            except Exception as ex:  # noqa: BLE001 - reported
                print("%s: error: %s" % (name, ex))
        return 0
    cli, data = argv[1], argv[2]
    only = set(argv[3:])
    names = sorted(f[:-7] for f in os.listdir(data) if f.endswith(".pickle") and
                   os.path.exists(os.path.join(data, f[:-7] + ".stats.json")))
    checks = [("replay", n, lambda n=n: check_replay(cli, data, n)) for n in names]
    for base, name in [("tf_default", "tf_expandable"), ("tf_default", "tf_msplit128"), ("tf_default", "tf_rp2"),
                       ("tf_default", "tf_gc"), ("cnn_default", "cnn_expandable")]:
        checks.append(("predict", name, lambda b=base, n=name: check_predict(cli, data, b, n)))
    for base, name in [("tf_default", "tf_limit"), ("cnn_default", "cnn_limit"), ("tf_default", "tf_at_limit")]:
        checks.append(("first_oom", name, lambda b=base, n=name: check_first_oom(cli, data, b, n)))
    failed = 0
    for kind, name, fn in checks:
        if only and name not in only:
            continue
        try:
            why = fn()
        except Exception as ex:  # noqa: BLE001 - reported as a failure
            why = "error: %s" % ex
        if why and name in KNOWN:
            print("KNOWN %s %s: %s (%s)" % (kind, name, why, KNOWN[name]))
        elif why:
            failed += 1
            print("FAIL %s %s: %s" % (kind, name, why))
        else:
            print("ok %s %s" % (kind, name))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
