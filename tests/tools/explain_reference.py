#!/usr/bin/env python3
"""tcuda whatif's "explain" object and tcuda compare against a reference
computed here from the snapshots themselves (tests/data/whatif, recorded
by torch 2.11 on an H200), with Python's pickle module, not tcuda.

The reference walks a history's trace: reserved bytes from its segment
entries, the live allocations from its alloc and free_requested entries,
the requests (alloc and oom entries) by position. Block sizes (rounded by
the allocator) are not in the trace, so totals are checked against
torch's own memory_stats (NAME.stats.json) and the grouping by stack is
checked in blocks and requested bytes.

The committed snapshots keep frames only on oom entries, so the grouping
is also checked on copies of them given synthetic stacks (written here)
that mix frames torch's viewer drops, torch's own files and user frames.

usage: explain_reference.py TCUDA_CLI DATA_DIR [--extra SNAPSHOT.pickle]...

--extra checks one more snapshot the same way (one recorded with
stacks="python" on a GPU, say): its instants and holders against the
walk of its own trace, with no stats file to compare totals with."""
import json
import os
import pickle
import subprocess
import sys
import tempfile

CLI, DATA = sys.argv[1], sys.argv[2]
EXTRA = [sys.argv[i + 1] for i in range(3, len(sys.argv) - 1) if sys.argv[i] == "--extra"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


# ---- the frame filter, written from the spec in docs/whatif.md ----
VIEWER_NAMES = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
                "PyEval_", "PyObject_", "PyFunction_"]
VIEWER_FILES = ["core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
                "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"]


def is_viewer_internal(f):
    return any(s in f["name"] for s in VIEWER_NAMES) or any(s in f["filename"] for s in VIEWER_FILES)


def is_torch(f):
    return any(s in f["filename"] for s in ("/torch/", "/c10/", "/aten/")) or \
        f["name"].startswith(("c10::", "at::", "torch::"))


def fmt(f):
    return "%s:%d:%s" % (f["filename"].rsplit("/", 1)[-1], f["line"], f["name"])


def user_frames(frames, most):
    for keep in (lambda f: not is_viewer_internal(f) and not is_torch(f),
                 lambda f: not is_viewer_internal(f), lambda f: True):
        kept = [fmt(f) for f in frames if keep(f)][:most]
        if kept:
            return kept
    return []


# ---- the trace walk ----
def walk(trace, stop_request):
    """The live allocations (addr -> (request, size, frames)) right after
    request stop_request, and the reserved bytes then."""
    live, reserved, req = {}, 0, -1
    for e in trace:
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif a in ("alloc", "oom"):
            if req == stop_request:
                break
            req += 1
            if a == "alloc":
                live[e["addr"]] = (req, e["size"], e.get("frames") or [])
        elif a == "free_requested":
            if req == stop_request:
                break
            live.pop(e["addr"], None)
    return live, reserved


def reserved_peak_request(trace):
    """The first request after which the reserved bytes are at their
    highest (reserved grows only in a request's segment entries)."""
    reserved, req, best, at = 0, -1, -1, None
    for e in trace:
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif a in ("alloc", "oom"):
            req += 1
            if reserved > best:
                best, at = reserved, req
    return at, best


def groups_of(live):
    g = {}
    for req, size, frames in live.values():
        key = tuple(user_frames(frames, 3)) if frames else ()
        n, b = g.get(key, (0, 0))
        g[key] = (n + 1, b + size)
    return g


def tcuda_groups(instant):
    g = {}
    for h in instant["holders"]:
        key = tuple(h["frames"])
        check(h["stack"] == ("recorded" if key else "none"), "holder kind %s for %r" % (h["stack"], key))
        check(key not in g, "two holders with the same frames %r" % (key,))
        g[key] = (h["blocks"], h["requested"])
    return g


def run(*args):
    p = subprocess.run([CLI] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        check(False, "tcuda %s exited %d: %s" % (" ".join(args), p.returncode, p.stderr[:500]))
        return None
    return json.loads(p.stdout)


def explain_of(path, fraction):
    """The explain object of the replay under the recorded config and, for a
    run recorded under a limit, that limit (the snapshot does not hold it)."""
    extra = ["--fraction", repr(fraction)] if fraction else []
    doc = run("whatif", path, "--config", "", "--json", *extra)
    return doc["explain"] if doc else None


def check_instant(name, label, trace, instant, want_request=None):
    check(instant is not None, "%s: %s missing" % (name, label))
    if instant is None:
        return
    if want_request is not None:
        check(instant["request"] == want_request,
              "%s: %s at request %s, the reference says %s" % (name, label, instant["request"], want_request))
    live, reserved = walk(trace, instant["request"])
    check(instant["reserved"] == reserved,
          "%s: %s reserved %d, the trace's segments hold %d" % (name, label, instant["reserved"], reserved))
    ref = groups_of(live)
    got = tcuda_groups(instant)
    check(got == ref, "%s: %s holders differ:\n  tcuda %s\n  reference %s" % (
        name, label, sorted(got.items())[:6], sorted(ref.items())[:6]))
    check(instant["blocks"] == len(live), "%s: %s has %d blocks, the trace %d" % (
        name, label, instant["blocks"], len(live)))
    parts = instant["allocated"] + instant["pending_free"] + instant["inactive_split"]["bytes"] + \
        instant["free_segments"]["bytes"]
    check(parts == instant["reserved"], "%s: %s parts add up to %d, not reserved %d" % (
        name, label, parts, instant["reserved"]))
    shares = sorted((h["bytes"] for h in instant["holders"]), reverse=True)
    check(shares == [h["bytes"] for h in instant["holders"]], "%s: %s holders not largest first" % (name, label))


def check_snapshot(name, path, trace, stats, frames_added):
    ex = explain_of(path, stats["meta"].get("fraction") if stats else None)
    if ex is None:
        return
    check(ex["stacks_recorded"] == frames_added, "%s: stacks_recorded %s" % (name, ex["stacks_recorded"]))
    if not frames_added:
        check("_record_memory_history" in (ex["how_to_record"] or "") and "stacks=" in ex["how_to_record"],
              "%s: how_to_record does not say how" % name)
    at, best = reserved_peak_request(trace)
    check_instant(name, "peak_reserved", trace, ex["peak_reserved"], at)
    check_instant(name, "peak_allocated", trace, ex["peak_allocated"])
    if stats and stats.get("end"):  # tf_at_limit keeps only its meta
        end = stats["end"]
        check(ex["peak_reserved"]["reserved"] == end["reserved_bytes.all.peak"],
              "%s: reserved at the peak %d, torch's peak %d" % (name, ex["peak_reserved"]["reserved"],
                                                                end["reserved_bytes.all.peak"]))
        check(ex["peak_allocated"]["allocated"] == end["allocated_bytes.all.peak"],
              "%s: allocated at the peak %d, torch's peak %d" % (name, ex["peak_allocated"]["allocated"],
                                                                 end["allocated_bytes.all.peak"]))
    reqs = [e for e in trace if e["action"] in ("alloc", "oom")]
    first = next((i for i, e in enumerate(reqs) if e["action"] == "oom"), None)
    if first is None:
        check(ex["first_oom"] is None, "%s: a first OOM where the history has none" % name)
    else:
        fo = ex["first_oom"]
        check(fo is not None, "%s: no first OOM, the history's is request %d" % (name, first))
        if fo:
            check(fo["size"] == reqs[first]["size"], "%s: first OOM size %d" % (name, fo["size"]))
            want = user_frames(reqs[first].get("frames") or [], 16)
            check(fo["stack"] == want, "%s: first OOM stack %r, want %r" % (name, fo["stack"], want))
            check_instant(name, "first_oom", trace, fo["state"], first)
    return ex


# ---- synthetic stacks ----
def stack_for(i, size):
    torch_cpp = {"name": "at::native::empty_cuda", "filename": "/pytorch/aten/src/ATen/native/Empty.cpp", "line": 7}
    viewer = {"name": "_PyEval_EvalFrameDefault", "filename": "/usr/src/python/Python/ceval.c", "line": 4200}
    boxing = {"name": "wrapper", "filename": "/pytorch/aten/src/ATen/core/boxing/impl.h", "line": 3}
    torch_py = {"name": "forward", "filename": "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",
                "line": 125}
    kind = i % 7
    if kind == 0:
        return []  # this request has none
    if kind == 1:  # torch frames only: the viewer's filter is the fallback
        return [torch_cpp, viewer, torch_py]
    if kind == 2:  # only frames the viewer drops: all of them are the fallback
        return [viewer, boxing]
    layer = "block%d" % (size % 3)
    return [torch_cpp, viewer, boxing, torch_py,
            {"name": layer, "filename": "/home/u/model.py", "line": 40 + size % 3},
            viewer,
            {"name": "step", "filename": "/home/u/train.py", "line": 12 + kind},
            {"name": "main", "filename": "/home/u/train.py", "line": 99},
            {"name": "<module>", "filename": "/home/u/train.py", "line": 120}]


def with_stacks(snap):
    for trace in snap["device_traces"]:
        n = 0
        for e in trace:
            if e["action"] in ("alloc", "oom"):
                e["frames"] = stack_for(n, e["size"])
                n += 1
    return snap


def main():
    tmp = tempfile.mkdtemp()
    results = {}
    for name in ("tf_default", "tf_expandable", "cnn_default", "side_stream", "unet", "tf_limit", "cnn_limit",
                 "tf_at_limit", "kv_decoder", "moe"):
        path = os.path.join(DATA, name + ".pickle")
        with open(path, "rb") as f:
            snap = pickle.load(f)
        with open(os.path.join(DATA, name + ".stats.json")) as f:
            stats = json.load(f)
        trace = snap["device_traces"][0]
        results[name] = check_snapshot(name, path, trace, stats, False)
        if name in ("tf_default", "tf_expandable", "cnn_limit", "tf_at_limit", "side_stream"):
            synth = with_stacks(snap)
            sp2 = os.path.join(tmp, name + ".stacks.pickle")
            with open(sp2, "wb") as f:
                pickle.dump(synth, f, protocol=4)
            ex = check_snapshot(name + " (stacks)", sp2, synth["device_traces"][0], stats, True)
            if ex and name in ("tf_default", "tf_expandable"):
                keys = [tuple(h["frames"]) for h in ex["peak_reserved"]["holders"]]
                check(("model.py:40:block0", "train.py:15:step", "train.py:99:main") in keys or
                      any(k and k[0].startswith("model.py:") for k in keys),
                      "%s: no user-frame holder among %r" % (name, keys[:5]))
                check(any(k == ("Empty.cpp:7:at::native::empty_cuda", "linear.py:125:forward") for k in keys),
                      "%s: the torch-only stack did not fall back to the viewer's filter: %r" % (name, keys[:8]))
                check(any(k and k[0].startswith("ceval.c:") for k in keys),
                      "%s: the viewer-only stack did not fall back to all frames: %r" % (name, keys[:8]))

    for path in EXTRA:
        with open(path, "rb") as f:
            snap = pickle.load(f)  # a file the caller recorded and trusts
        trace = snap["device_traces"][0]
        has = any(e.get("frames") for e in trace if e["action"] == "alloc")
        results[path] = check_snapshot(path, path, trace, None, has)

    # ---- compare ----
    b, a = os.path.join(DATA, "tf_default.pickle"), os.path.join(DATA, "tf_expandable.pickle")
    doc = run("compare", b, a, "--json")
    if doc:
        for side, name in (("before", "tf_default"), ("after", "tf_expandable")):
            with open(os.path.join(DATA, name + ".stats.json")) as f:
                end = json.load(f)["end"]
            d = doc[side]
            check(d["peak_reserved"] == end["reserved_bytes.all.peak"], "compare %s peak_reserved %d, torch %d" % (
                side, d["peak_reserved"], end["reserved_bytes.all.peak"]))
            check(d["peak_allocated"] == end["allocated_bytes.all.peak"], "compare %s peak_allocated" % side)
            check(abs(d["ratio"] - end["reserved_bytes.all.peak"] / end["allocated_bytes.all.peak"]) < 1e-5,
                  "compare %s ratio %s" % (side, d["ratio"]))
            check(d["recorded_ooms"] == 0 and d["ooms"] == 0, "compare %s OOMs" % side)
        rb = doc["before"]["peak_reserved"]
        ra = doc["after"]["peak_reserved"]
        check(doc["change"]["peak_reserved"] == ra - rb, "compare: change in peak reserved")
        check(abs(doc["change"]["peak_reserved_ratio"] - ra / rb) < 1e-5, "compare: peak reserved ratio")
        hs = doc["holders_at_peak_reserved"]
        check(len(hs) == 1 and hs[0]["stack"] == "none" and
              hs[0]["before_bytes"] == doc["before_explain"]["peak_reserved"]["allocated"] and
              hs[0]["after_bytes"] == doc["after_explain"]["peak_reserved"]["allocated"],
              "compare: side-by-side holders %r" % hs)
    # stacks on both sides, matched by frames
    sb, sa = os.path.join(tmp, "tf_default.stacks.pickle"), os.path.join(tmp, "tf_expandable.stacks.pickle")
    doc = run("compare", sb, sa, "--json")
    if doc:
        bx, ax = doc["before_explain"]["peak_reserved"], doc["after_explain"]["peak_reserved"]
        want_b = {tuple(h["frames"]): h["bytes"] for h in bx["holders"]}
        want_a = {tuple(h["frames"]): h["bytes"] for h in ax["holders"]}
        got_b = {tuple(h["frames"]): h["before_bytes"] for h in doc["holders_at_peak_reserved"] if h["before_bytes"]}
        got_a = {tuple(h["frames"]): h["after_bytes"] for h in doc["holders_at_peak_reserved"] if h["after_bytes"]}
        check(got_b == want_b and got_a == want_a, "compare: side by side differs from each side's holders")

    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("ok: explain and compare agree with the reference on %d snapshots" % len(results))


main()
