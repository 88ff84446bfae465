#!/usr/bin/env python3
"""The compact policy's target on every workload of its test set.

Usage: compact_workloads.py TCUDA_CLI DATA_DIR [--table]

For each workload, P is its peak allocated bytes under torch's default
policy and the bound is max(1.10 x P, P + 4 MiB). Where the snapshot's
blocks wait for other streams (record_stream: a free_requested entry
whose free_completed comes later), no allocator can reuse them before
then, so P is the peak of the allocated bytes plus those still waiting,
summed here from the snapshot's trace with python's pickle. policy:compact passes
when its peak reserved (mapped pages) is within the bound and it has no
more OOMs than torch's default.

- tests/data/whatif/*.pickle (PyTorch 2.11 snapshots): both rows come from
  `tcuda whatif` on the simulated device, under the recorded memory limit
  when there was one. Where torch ran the default policy without a limit,
  P must also equal torch's own recorded allocated_bytes.all.peak
  (NAME.stats.json): the independent reference.
- tests/data/torch/*.trace (the project's traces): `tcuda replay
  --simulate`; P is torch's recorded peak (NAME.expected.json) when the
  trace ran under torch's defaults, else the simulated default's.
Exit 1 when a workload misses; --table prints the markdown table.
"""
import glob
import json
import os
import pickle
import subprocess
import sys

MIB = 1 << 20
HOLD_OUT = {"moe", "cnn_limit"}  # never tuned on (docs/performance.md, "The compact policy per workload")


def bound(p):
    return max(p * 11 // 10, p + 4 * MIB)


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-400:]))
    return r.stdout


def whatif_rows(cli, path, fraction):
    cmd = [cli, "whatif", path, "--json", "--config", "", "--config", "policy:compact"]
    if fraction:
        cmd += ["--fraction", repr(fraction)]
    doc = json.loads(run(cmd))
    given = [r for r in doc["configs"] if r["source"] == "given"]
    return given[0], given[1]


def held_peak(path):
    """Peak of allocated plus freed-but-waiting bytes on device 0's trace;
    None when no free waited (every free completed at once)."""
    with open(path, "rb") as f:
        trace = (pickle.load(f).get("device_traces") or [[]])[0]
    live, waiting, now, peak, waited = {}, {}, 0, 0, False
    for e in trace:
        act, addr = e.get("action"), e.get("addr")
        if act == "alloc":
            live[addr] = e["size"]
            now += e["size"]
        elif act == "free_requested" and addr in live:
            waiting[addr] = live.pop(addr)
        elif act == "free_completed":
            if addr in waiting:
                now -= waiting.pop(addr)
            elif addr in live:
                now -= live.pop(addr)
        if waiting:
            waited = True
        peak = max(peak, now)
    return peak if waited else None


def snapshot_workload(cli, path):
    name = os.path.basename(path)[: -len(".pickle")]
    meta_path = path[: -len(".pickle")] + ".stats.json"
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    m = meta.get("meta", {})
    fraction = m.get("fraction") or 0
    torch_row, compact = whatif_rows(cli, path, fraction)
    p = torch_row["peak_allocated"]
    held = held_peak(path)
    if held is not None and held > p:
        p = held
    ref = None
    # torch's own figure, where torch ran its default over the whole history
    if m.get("conf", "") == "" and not fraction and not m.get("max_entries", 0) == m.get("entries", [0])[-1]:
        ref = meta["end"]["allocated_bytes.all.peak"]
    return dict(name=name, kind="snapshot", limit=m.get("limit") or 0, p=p, p_alloc=torch_row["peak_allocated"], ref=ref,
                torch_reserved=torch_row["peak_reserved"], torch_ooms=torch_row["ooms"],
                reserved=compact["peak_reserved"], allocated=compact["peak_allocated"], ooms=compact["ooms"])


def trace_peaks(cli, path, conf):
    out = run([cli, "replay", "--simulate", "--config", conf, path])
    cps = json.loads(out)
    get = lambda k: max((c["stats"][k] for c in cps), default=0)
    return get("allocated_bytes.all.peak"), get("reserved_bytes.all.peak"), get("num_ooms")


def trace_workload(cli, path):
    name = os.path.basename(path)[: -len(".trace")]
    base = path[: -len(".trace")]
    p, torch_reserved, torch_ooms = trace_peaks(cli, path, "")
    ref = None
    if not os.path.exists(base + ".config") and os.path.exists(base + ".expected.json"):
        exp = json.load(open(base + ".expected.json"))
        ref = max((c["stats"]["allocated_bytes.all.peak"] for c in exp), default=0)
    a, r, o = trace_peaks(cli, path, "policy:compact")
    return dict(name="trace:" + name, kind="trace", limit=0, p=p, ref=ref, torch_reserved=torch_reserved,
                torch_ooms=torch_ooms, reserved=r, allocated=a, ooms=o)


def mib(v):
    return "%.1f" % (v / MIB)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, data = sys.argv[1], sys.argv[2]
    table = "--table" in sys.argv[3:]
    rows, errors = [], []
    for path in sorted(glob.glob(os.path.join(data, "whatif", "*.pickle"))):
        rows.append(snapshot_workload(cli, path))
    for path in sorted(glob.glob(os.path.join(data, "torch", "*.trace"))):
        rows.append(trace_workload(cli, path))
    if not rows:
        print("FAIL: no workloads under %s" % data)
        return 1
    if table:
        print("| workload | set | torch default: peak reserved / peak allocated P | bound | compact peak reserved | ratio to P | result |")
        print("|---|---|---:|---:|---:|---:|---|")
    passed = 0
    for w in rows:
        b = bound(w["p"])
        ok = w["reserved"] <= b and w["ooms"] <= w["torch_ooms"]
        why = []
        if w["reserved"] > b:
            why.append("peak reserved %d > bound %d" % (w["reserved"], b))
        if w["ooms"] > w["torch_ooms"]:
            why.append("%d OOMs, torch default %d" % (w["ooms"], w["torch_ooms"]))
        if w["ref"] is not None and w["ref"] != w.get("p_alloc", w["p"]):
            errors.append("%s: the simulated torch default's peak allocated %d is not torch's recorded %d"
                          % (w["name"], w.get("p_alloc", w["p"]), w["ref"]))
        passed += ok
        held = "hold-out" if w["name"] in HOLD_OUT or w["kind"] == "trace" else "tuning"
        ratio = w["reserved"] / w["p"] if w["p"] else 0.0
        if table:
            print("| %s | %s | %s / %s MiB | %s MiB | %s MiB | %.3f | %s |" % (
                w["name"], held, mib(w["torch_reserved"]), mib(w["p"]), mib(b), mib(w["reserved"]), ratio,
                "pass" if ok else "MISS: " + "; ".join(why)))
        else:
            print("%-5s %-32s %-8s P %11d bound %11d compact %11d (%.3f x P)%s" % (
                "ok" if ok else "MISS", w["name"], held, w["p"], b, w["reserved"], ratio,
                "" if ok else "  " + "; ".join(why)))
    checked = sum(1 for w in rows if w["ref"] is not None)
    print("%d of %d workloads within the bound; P equal to torch's recorded peak on %d of %d with a recording"
          % (passed, len(rows), checked - sum(1 for e in errors), checked))
    if checked == 0:
        errors.append("no workload had torch's recorded peak to check P against")
    for e in errors:
        print("FAIL: " + e)
    return 0 if passed == len(rows) and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
