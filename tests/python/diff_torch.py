"""Differential test: one script, run against torch.cuda and against tcuda
in two subprocesses, whose outputs must be equal: devices, streams, events,
RNG values and states, memory stats/summary/snapshot for the same request
sequence, comm results and NVTX depths.

    python3 diff_torch.py                       # compare; exit 1 on a difference
    python3 diff_torch.py --backend torch|tcuda  # one side, JSON out
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

MiB = 1 << 20


def memory_section(cuda, out):
    """A request sequence through caching_allocator_alloc on two streams;
    runs first, so each side's allocator starts empty."""
    side = cuda.Stream()
    sizes = [1, 511, 512, 513, 4096, MiB - 1, MiB, MiB + 1, 2 * MiB, 3 * MiB + 5, 10 * MiB, 10 * MiB + 1,
             20 * MiB + 7, 25 * MiB, 64 * MiB + 3]
    live = []
    for i, n in enumerate(sizes):
        live.append(cuda.caching_allocator_alloc(n, 0, side if i % 3 == 2 else None))
    for p in live[::2]:
        cuda.caching_allocator_delete(p)
    out["stats_mid"] = dict(cuda.memory_stats(0))
    again = [cuda.caching_allocator_alloc(n, 0) for n in (700, 3 * MiB, 9 * MiB, 30 * MiB)]
    out["stats_full"] = dict(cuda.memory_stats(0))
    out["summary"] = cuda.memory_summary(0)
    out["snapshot"] = [{"total_size": s["total_size"], "allocated_size": s["allocated_size"],
                        "segment_type": s["segment_type"],
                        "blocks": [(b["size"], b["state"]) for b in s["blocks"]]}
                       for s in cuda.memory_snapshot()]
    out["snapshot"].sort(key=lambda s: json.dumps(s, sort_keys=True))
    out["allocated"] = cuda.memory_allocated(0)
    out["reserved"] = cuda.memory_reserved(0)
    out["max_allocated"] = cuda.max_memory_allocated(0)
    for p in live[1::2] + again:
        cuda.caching_allocator_delete(p)
    cuda.reset_peak_memory_stats(0)
    out["after_reset_peak"] = cuda.max_memory_allocated(0)
    cuda.synchronize()
    cuda.empty_cache()
    out["after_empty_cache"] = (cuda.memory_allocated(0), cuda.memory_reserved(0))
    cuda.reset_accumulated_memory_stats(0)
    out["stats_end"] = dict(cuda.memory_stats(0))


def device_section(cuda, out):
    p = cuda.get_device_properties(0)
    out["device"] = {"count": cuda.device_count(), "current": cuda.current_device(),
                     "name": cuda.get_device_name(0), "capability": list(cuda.get_device_capability(0)),
                     "props": [p.name, p.major, p.minor, p.total_memory, p.multi_processor_count],
                     "total": cuda.mem_get_info(0)[1], "available": cuda.is_available()}
    with cuda.device(0):
        out["device"]["in_guard"] = cuda.current_device()


def stream_section(torch, cuda, out):
    r = {"priority_range": list(cuda.Stream.priority_range())}
    s = cuda.Stream(priority=-1)
    r["priority"] = s.priority
    r["default_is_current"] = cuda.current_stream() == cuda.default_stream()
    r["default_handle"] = cuda.default_stream().cuda_stream
    with cuda.stream(s):
        r["inside"] = cuda.current_stream() == s
    r["restored"] = cuda.current_stream() == cuda.default_stream()
    handles = [cuda.Stream().cuda_stream for _ in range(33)]
    r["pool_period"] = handles[1:].index(handles[0]) + 1 if handles[0] in handles[1:] else -1
    x = torch.ones(1 << 22, device="cuda")
    with cuda.stream(s):
        if cuda is not torch.cuda:  # tcuda's current stream is its own: point torch at the same stream
            torch.cuda.set_stream(torch.cuda.ExternalStream(s.cuda_stream))
        y = x * 2
    torch.cuda.set_stream(torch.cuda.default_stream())
    e = s.record_event()
    cuda.default_stream().wait_event(e)
    cuda.current_stream().wait_stream(s)
    s.synchronize()
    r["query_after_sync"] = s.query()
    r["event_query"] = e.query()
    r["y_sum"] = float(y.sum().item())
    out["streams"] = r


def event_section(cuda, out):
    a, b = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    r = {"query": b.query(), "elapsed_nonneg": a.elapsed_time(b) >= 0}
    try:
        cuda.Event().elapsed_time(cuda.Event())
        r["no_timing_raises"] = False
    except (RuntimeError, ValueError):  # torch raises ValueError here
        r["no_timing_raises"] = True
    ip = cuda.Event(interprocess=True)
    ip.record()
    r["ipc_handle_len"] = len(bytes(ip.ipc_handle()))
    out["events"] = r


def _digest(t):
    return hashlib.sha256(t.cpu().contiguous().view(-1).view(torch_uint8()).numpy().tobytes()).hexdigest()


def torch_uint8():
    import torch
    return torch.uint8


def rng_section(torch, cuda, tcuda_mode, out):
    def state():
        s = cuda.get_rng_state()
        return list(bytes(s) if isinstance(s, (bytes, bytearray)) else s.tolist())

    def fill(kind, dtype, n, *args):
        t = torch.empty(n, dtype=dtype, device="cuda")
        if tcuda_mode:
            import tcuda
            getattr(tcuda, kind)(t, *args)
        else:
            getattr(t, kind)(*args)
        return _digest(t)

    r = {}
    cuda.manual_seed(1234)
    r["seed"] = cuda.initial_seed()
    r["state0"] = state()
    plan = [("uniform_", torch.float32, 1000), ("uniform_", torch.float64, 4097, -2.0, 3.0),
            ("normal_", torch.float32, 100003), ("normal_", torch.bfloat16, 999, 1.0, 0.5),
            ("random_", torch.int64, 5000), ("random_", torch.int32, 777, 10), ("random_", torch.uint8, 300, 3, 9),
            ("uniform_", torch.float16, (1 << 20) + 3)]
    r["fills"] = []
    for kind, dtype, n, *args in plan:
        r["fills"].append([kind, str(dtype), n, fill(kind, dtype, n, *args), state()])
    saved = cuda.get_rng_state()
    first = fill("uniform_", torch.float32, 4096)
    cuda.set_rng_state(saved)
    r["replay_equal"] = fill("uniform_", torch.float32, 4096) == first
    r["state_all_len"] = len(cuda.get_rng_state_all())
    cuda.manual_seed_all(7)
    r["after_seed_all"] = state()
    out["rng"] = r


def comm_section(torch, cuda, tcuda_mode, out):
    if tcuda_mode:
        import tcuda
        comm = tcuda.comm
    else:
        import torch.cuda.comm as comm  # a submodule: not loaded by `import torch`

    def back(t):
        return t if isinstance(t, torch.Tensor) else torch.from_dlpack(t)

    def show(t):
        t = back(t)
        return [str(t.device), list(t.shape), t.cpu().flatten().tolist()]

    n = torch.cuda.device_count()
    devs = list(range(min(n, 2)))
    base = torch.arange(24, dtype=torch.float32, device="cuda:0").reshape(4, 6)
    r = {"devices": devs}
    r["broadcast"] = [show(t) for t in comm.broadcast(base, devs)]
    copies = [back(t) for t in comm.broadcast(base, devs)]
    r["reduce_add"] = show(comm.reduce_add(copies, 0))
    r["scatter"] = [show(t) for t in comm.scatter(base, devs, dim=1)]
    r["scatter_sizes"] = [show(t) for t in comm.scatter(base, devs, chunk_sizes=[4] if len(devs) == 1 else [3, 1])]
    r["gather"] = show(comm.gather(copies, dim=0, destination=0))
    r["gather_cpu"] = show(comm.gather(copies, dim=1, destination=-1))
    ints = torch.arange(10, dtype=torch.int64, device="cuda:0")
    r["bcast_coalesced"] = [[show(t) for t in row] for row in comm.broadcast_coalesced([base, ints], devs)]
    outs = [torch.zeros(4, 6, device="cuda:%d" % d) for d in devs]
    comm.broadcast(base, out=outs)
    r["broadcast_out"] = [show(t) for t in outs]
    torch.cuda.synchronize()
    out["comm"] = r


def nvtx_section(cuda, out):
    out["nvtx"] = [cuda.nvtx.range_push("a"), cuda.nvtx.range_push("b"), cuda.nvtx.range_pop(),
                   cuda.nvtx.range_pop()]


def run(backend):
    import torch
    tcuda_mode = backend == "tcuda"
    if tcuda_mode:
        import tcuda as cuda
    else:
        cuda = torch.cuda
    torch.cuda.init()
    out = {}
    memory_section(cuda, out)  # first: nothing else has used either allocator
    device_section(cuda, out)
    event_section(cuda, out)
    rng_section(torch, cuda, tcuda_mode, out)
    stream_section(torch, cuda, out)
    comm_section(torch, cuda, tcuda_mode, out)
    nvtx_section(cuda, out)
    print(json.dumps(out, sort_keys=True))


def diff(a, b, path, lines):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                lines.append("%s.%s: only in %s" % (path, k, "torch" if k in a else "tcuda"))
            else:
                diff(a[k], b[k], "%s.%s" % (path, k), lines)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), lines)
    elif isinstance(a, str) and isinstance(b, str) and "\n" in a:
        for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
            if x != y:
                lines.append("%s line %d:\n    torch: %s\n    tcuda: %s" % (path, i + 1, x, y))
        if len(a.splitlines()) != len(b.splitlines()):
            lines.append("%s: line counts differ" % path)
    elif a != b:
        lines.append("%s: torch %r, tcuda %r" % (path, a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["torch", "tcuda"])
    a = ap.parse_args()
    if a.backend:
        run(a.backend)
        return 0
    res = {}
    for b in ("torch", "tcuda"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--backend", b], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            print("FAIL: the %s run failed (exit %d)" % (b, r.returncode))
            return 1
        res[b] = json.loads(r.stdout.strip().splitlines()[-1])
    lines = []
    diff(res["torch"], res["tcuda"], "out", lines)
    sections = sorted(res["torch"])
    bad = sorted({ln.split(".")[1].split("[")[0].split(":")[0].split(" ")[0] for ln in lines})
    for s in sections:
        print("%s %s" % ("FAIL" if s in bad else "ok  ", s))
    for ln in lines[:80]:
        print("  " + ln)
    if len(lines) > 80:
        print("  ... %d more differences" % (len(lines) - 80))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
