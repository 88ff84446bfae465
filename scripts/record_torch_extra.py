#!/usr/bin/env python3
"""Record more of PyTorch's behaviour as ground truth for tcuda's tests. Run it
on the GPU machine with the torch tcuda mirrors (2.11).

Usage: scripts/record_torch_extra.py OUTDIR [TRACE ...]

Writes into OUTDIR:
  torch_cuda_names.txt         torch.cuda.__all__, one name a line, sorted
  torch_cuda_memory_names.txt  torch.cuda.memory.__all__, the same
  torch_nogpu.json             {name: "return <type> <repr>" | "raise <Exception>"}
                               for each torch.cuda / torch.cuda.memory callable
                               called with no arguments in a process that sees
                               no GPU (CUDA_VISIBLE_DEVICES=""): the behaviour
                               tcuda's Python package mirrors without a GPU
  torch_nvtx.json              what range_push/range_pop return, in order
  NAME.summary.txt             for each TRACE (a tests/data/torch/*.trace):
                               memory_summary() after the whole trace ran, and
  NAME.summary_abbrev.txt      memory_summary(abbreviated=True)
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def names(out):
    import torch
    import torch.cuda.memory as mem
    for fname, lst in (("torch_cuda_names.txt", torch.cuda.__all__),
                       ("torch_cuda_memory_names.txt", mem.__all__)):
        with open(os.path.join(out, fname), "w") as fh:
            fh.write("".join(n + "\n" for n in sorted(set(lst))))


def nogpu_child(out):
    """Runs with no GPU visible: call each public callable with no argument."""
    import torch
    import torch.cuda.memory as mem
    res = {}

    def timeout(*_):
        raise TimeoutError("took over 20 s")
    signal.signal(signal.SIGALRM, timeout)
    for prefix, mod in (("", torch.cuda), ("memory.", mem)):
        for n in sorted(set(mod.__all__)):
            f = getattr(mod, n, None)
            if f is None or isinstance(f, type) or not callable(f):
                continue
            signal.alarm(20)
            try:
                v = f()
                r = repr(v)
                res[prefix + n] = "return %s %s" % (type(v).__name__, r if len(r) < 200 else r[:200] + "...")
            except BaseException as e:  # noqa: BLE001 - we record whatever it raises
                res[prefix + n] = "raise %s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
            finally:
                signal.alarm(0)
    with open(os.path.join(out, "torch_nogpu.json"), "w") as fh:
        json.dump(res, fh, indent=1, sort_keys=True)
        fh.write("\n")


def nvtx(out):
    import torch
    seq = []
    for step in ("push a", "push b", "pop", "pop", "pop", "start c", "mark d"):
        op, arg = step.split()[0], (step.split() + [None])[1]
        try:
            if op == "push":
                v = torch.cuda.nvtx.range_push(arg)
            elif op == "pop":
                v = torch.cuda.nvtx.range_pop()
            elif op == "start":
                v = torch.cuda.nvtx.range_start(arg)
                v = "int" if isinstance(v, int) else repr(v)
            else:
                v = torch.cuda.nvtx.mark(arg)
            seq.append([step, v])
        except BaseException as e:  # noqa: BLE001
            seq.append([step, "raise %s" % type(e).__name__])
    with open(os.path.join(out, "torch_nvtx.json"), "w") as fh:
        json.dump(seq, fh)
        fh.write("\n")


def summary(out, trace):
    from record_torch_traces import parse_trace
    import torch
    with open(trace) as fh:
        ops = parse_trace(fh.read())
    dev = 0
    torch.cuda.set_device(dev)
    streams = {0: torch.cuda.default_stream(dev)}
    ptrs = {}
    for op in ops:
        if op[0] == "a":
            _, hid, size, sno = op
            if sno not in streams:
                streams[sno] = torch.cuda.Stream(device=dev)
            ptrs[hid] = torch.cuda.caching_allocator_alloc(size, dev, streams[sno])
        elif op[0] == "f":
            p = ptrs.pop(op[1])
            if p:
                torch.cuda.caching_allocator_delete(p)
        elif op[0] == "e":
            torch.cuda.empty_cache()
        elif op[0] == "r":
            torch.cuda.reset_peak_memory_stats(dev)
    name = os.path.basename(trace)[:-len(".trace")]
    with open(os.path.join(out, name + ".summary.txt"), "w") as fh:
        fh.write(torch.cuda.memory_summary(dev))
    with open(os.path.join(out, name + ".summary_abbrev.txt"), "w") as fh:
        fh.write(torch.cuda.memory_summary(dev, abbreviated=True))
    with open(os.path.join(out, name + ".summary_stats.json"), "w") as fh:
        json.dump({k: int(v) for k, v in torch.cuda.memory_stats(dev).items()}, fh, indent=0, sort_keys=True)


def main(argv):
    if len(argv) >= 3 and argv[1] == "--nogpu-child":
        nogpu_child(argv[2])
        return 0
    if len(argv) >= 3 and argv[1] == "--summary-child":
        summary(argv[2], argv[3])
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    rc = 0
    names(out)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    rc |= subprocess.call([sys.executable, __file__, "--nogpu-child", out], env=env, timeout=600)
    nvtx(out)
    for t in argv[2:]:  # each trace in a fresh process: a clean allocator
        rc |= subprocess.call([sys.executable, __file__, "--summary-child", out, t], timeout=300)
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
