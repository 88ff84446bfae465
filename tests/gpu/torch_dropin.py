"""tcuda under torch (tcuda.torch.install()) on a GPU, against native torch.

    python3 torch_dropin.py [--out DIR] [--cli PATH/TO/tcuda] [--only NAME,...]

Each section runs twice, each time in a fresh process: once on torch's own
allocator ("native") and once with tcuda installed. A section asserts what
must hold in its process (OOM caught and the program goes on, frames in the
history, memory back after a pool is freed) and returns values that must
be the same on both allocators (stats for the same requests, errors' types,
numerical results). Prints one line per section and "RESULT ..." lines;
exit 1 when a section fails, 77 without torch or a GPU.
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import traceback

MiB = 1 << 20
SECTIONS = []


def section(fn):
    SECTIONS.append(fn)
    return fn


def stat_keys(torch):
    """The stats both allocators must agree on for the same requests."""
    s = torch.cuda.memory_stats()
    keep = ("allocation.", "segment.", "active.", "allocated_bytes.", "reserved_bytes.", "active_bytes.",
            "requested_bytes.", "inactive_split.", "inactive_split_bytes.")
    return {k: v for k, v in s.items() if k.startswith(keep)}


# ---- sections: fn(torch, mode, ctx) -> dict compared across modes ----

@section
def install_state(torch, mode, ctx):
    import tcuda
    backend = torch.cuda.get_allocator_backend()  # torch reports the allocator's name()
    assert backend == ("tcuda" if mode == "tcuda" else "native"), backend
    out = {}
    if mode == "tcuda":
        assert tcuda.torch.is_installed()
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        # the same instance: tcuda's Python stats see torch's tensor
        assert tcuda.memory_allocated() == torch.cuda.memory_allocated() >= 3 * MiB, \
            (tcuda.memory_allocated(), torch.cuda.memory_allocated())
        mine, theirs = dict(tcuda.memory_stats()), dict(torch.cuda.memory_stats())
        diff = {k: (mine.get(k), theirs.get(k)) for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
        assert not diff, "tcuda.memory_stats() != torch.cuda.memory_stats(): %s" % diff
        tcuda.torch.install()  # idempotent
        del x
    return out


@section
def stats_sequence(torch, mode, ctx):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    seq = []
    keep = []
    for i, n in enumerate([1000, 3 * MiB, 30 * MiB, 512, 700 * 1024, 1, 21 * MiB, 2 * MiB + 1]):
        keep.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        if i % 3 == 2:
            keep.pop(0)
        seq.append(stat_keys(torch))
    del keep
    seq.append(stat_keys(torch))
    torch.cuda.empty_cache()
    seq.append(stat_keys(torch))
    summary = torch.cuda.memory_summary()
    assert "Allocated memory" in summary and "GPU reserved memory" in summary, summary[:400]
    return {"steps": seq, "num_alloc_retries": torch.cuda.memory_stats()["num_alloc_retries"]}


@section
def oom_catch_continue(torch, mode, ctx):
    torch.cuda.empty_cache()
    seen = []
    torch._C._cuda_attach_out_of_memory_observer(lambda dev, alloc, total, free: seen.append((dev, total)))
    before = torch.cuda.memory_stats()["num_ooms"]
    x = torch.ones(64 * MiB, dtype=torch.uint8, device="cuda")
    caught = None
    try:
        torch.empty(1 << 44, dtype=torch.uint8, device="cuda")  # 16 TiB
    except torch.cuda.OutOfMemoryError as e:
        caught = str(e)
    assert caught is not None, "no torch.cuda.OutOfMemoryError"
    assert caught.startswith("CUDA out of memory. Tried to allocate"), caught[:200]
    assert torch.cuda.memory_stats()["num_ooms"] == before + 1
    assert len(seen) == 1 and seen[0][0] == 0, seen
    # the program goes on: free, allocate, compute
    del x
    y = torch.ones(1 << 20, device="cuda")
    total = float(y.sum().item())
    # under a limit, as a training loop halving its batch would
    frac = 0.05
    torch.cuda.set_per_process_memory_fraction(frac)
    cap = int(torch.cuda.get_device_properties(0).total_memory * frac)
    batch, ooms = cap, 0
    while True:
        try:
            z = torch.empty(batch, dtype=torch.uint8, device="cuda")
            z.fill_(1)
            break
        except torch.cuda.OutOfMemoryError:
            ooms += 1
            batch //= 2
    assert ooms >= 1 and batch > 0
    torch.cuda.set_per_process_memory_fraction(1.0)
    del z
    if mode == "tcuda":
        assert "tcuda" in caught, caught  # tcuda's explanation ("... reserved by tcuda but unallocated")
    return {"sum": total, "halvings": ooms, "type": "OutOfMemoryError",
            "num_ooms_delta": torch.cuda.memory_stats()["num_ooms"] - before}


@section
def oom_snapshot_env(torch, mode, ctx):
    if mode != "tcuda":
        return {}
    path = os.environ.get("TCUDA_OOM_SNAPSHOT")
    assert path, "the driver sets TCUDA_OOM_SNAPSHOT for the tcuda run"
    if os.path.exists(path):
        os.unlink(path)
    try:
        torch.empty(1 << 45, dtype=torch.uint8, device="cuda")
        raise AssertionError("no OOM")
    except torch.cuda.OutOfMemoryError as e:
        assert "memory snapshot written to" in str(e), str(e)[-300:]
    with open(path, "rb") as f:
        doc = pickle.load(f)
    assert "segments" in doc
    return {}


@section
def history_snapshot(torch, mode, ctx):
    # Python frames only: symbolizing C++ frames (addr2line over libtorch) is slow
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    torch.cuda.memory._set_memory_metadata("step-7")

    def alloc_here():
        return torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")

    a = alloc_here()
    b = torch.empty(1000, device="cuda")
    del b
    snap = torch.cuda.memory._snapshot()
    traces = snap["device_traces"][0]
    allocs = [t for t in traces if t["action"] == "alloc" and t["size"] == 5 * MiB]
    assert allocs, [t["action"] for t in traces][:20]
    names = [f["name"] for f in allocs[-1]["frames"]]
    assert "alloc_here" in names, names[:15]
    assert allocs[-1].get("user_metadata") == "step-7", allocs[-1].get("user_metadata")
    live = [blk for seg in snap["segments"] for blk in seg["blocks"] if blk["state"] == "active_allocated"
            and blk["size"] >= 5 * MiB]
    assert live and any("alloc_here" in [f["name"] for f in blk["frames"]] for blk in live)
    path = os.path.join(ctx["tmp"], "%s.pickle" % mode)
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    del a
    with open(path, "rb") as f:
        doc = pickle.load(f)
    from torch.cuda import _memory_viz
    # (not _memory_viz.segments: its flame graph downloads a script)
    for plot in (_memory_viz.trace_plot, _memory_viz.segment_plot):
        assert len(plot(doc)) > 1000
    _memory_viz.segsum(doc)
    actions = sorted({t["action"] for t in doc["device_traces"][0]})
    if ctx.get("cli") and mode == "tcuda":
        r = subprocess.run([ctx["cli"], "whatif", path], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        print("    tcuda whatif: %s" % (r.stdout.strip().splitlines() or [""])[0])
    return {"actions": actions, "keys": sorted(doc.keys() - {"external_annotations"})}


@section
def history_state_mode(torch, mode, ctx):
    """context="state": frames on live blocks only, no trace stacks."""
    torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")

    def alloc_state():
        return torch.empty(7 * MiB, dtype=torch.uint8, device="cuda")

    a = alloc_state()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    live = [blk for seg in snap["segments"] for blk in seg["blocks"] if blk["state"] == "active_allocated"]
    with_frames = any("alloc_state" in [f["name"] for f in blk.get("frames", [])] for blk in live)
    trace_frames = sum(1 for t in snap["device_traces"][0] if t.get("frames"))
    del a
    assert with_frames
    return {"live_frames": with_frames, "trace_entries": len(snap["device_traces"][0]), "trace_frames": trace_frames}


@section
def flush_history_context(torch, mode, ctx):
    """empty_cache under each context, as PyTorch's test_memory_plots_free_segment_stack
    and test_memory_plots_metadata: its segment frees carry the caller's
    frames under "all" only, and every event the metadata set before."""
    out = {}
    for context in ("alloc", "all", "state"):
        torch.cuda.empty_cache()
        torch.cuda.memory._set_memory_metadata("md-" + context)
        torch.cuda.memory._record_memory_history(context=context, stacks="python")
        x = torch.rand(3, 4, device="cuda")
        del x
        torch.cuda.empty_cache()
        torch.cuda.memory._set_memory_metadata("")
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)
        trace = snap["device_traces"][0]
        frees = [t for t in trace if t["action"] == "segment_free"]
        assert frees, [t["action"] for t in trace]
        out[context] = {
            "segment_free_names_empty_cache": any(f["name"] == "empty_cache" for t in frees
                                                  for f in t.get("frames") or []),
            "empty_cache_anywhere": '"empty_cache"' in json.dumps(snap),
            "metadata": sorted({t.get("user_metadata") for t in trace}),
            "actions_with_frames_key": sorted({t["action"] for t in trace if "frames" in t})}
        assert out[context]["metadata"] == ["md-" + context], out[context]["metadata"]
    assert out["all"]["segment_free_names_empty_cache"], out
    assert not out["alloc"]["empty_cache_anywhere"] and not out["state"]["empty_cache_anywhere"], out
    return out


@section
def threads_with_history(torch, mode, ctx):
    """History on while Python threads and autograd's own thread allocate:
    the glue gathers frames (the GIL) before tcuda's lock, so nothing
    deadlocks, and every allocation is in the trace."""
    import threading
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    per_thread, nthreads = 200, 4

    def work():
        for i in range(per_thread):
            t = torch.empty(4096 + i, dtype=torch.uint8, device="cuda")
            del t

    threads = [threading.Thread(target=work) for _ in range(nthreads)]
    for t in threads:
        t.start()
    model = torch.nn.Linear(256, 256).cuda()
    for _ in range(3):  # backward runs on autograd's device thread
        model(torch.randn(64, 256, device="cuda")).sum().backward()
        snap = torch.cuda.memory._snapshot()  # while the threads allocate
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread is stuck"
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    sizes = {4096 + i for i in range(per_thread)}
    n = sum(1 for t in snap["device_traces"][0] if t["action"] == "alloc" and t["size"] in sizes)
    assert n == nthreads * per_thread, n
    return {"allocs_seen": n}


@section
def empty_cache_and_raw(torch, mode, ctx):
    torch.cuda.empty_cache()
    base = torch.cuda.memory_reserved()
    x = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
    del x
    held = torch.cuda.memory_reserved() - base
    torch.cuda.empty_cache()
    after = torch.cuda.memory_reserved() - base
    p = torch.cuda.caching_allocator_alloc(3 * MiB)
    got = torch.cuda.memory_allocated()
    torch.cuda.caching_allocator_delete(p)
    return {"held": held, "after": after, "raw_allocated": got}


@section
def record_stream(torch, mode, ctx):
    torch.cuda.empty_cache()
    side = torch.cuda.Stream()
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
    ptr = x.data_ptr()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)  # keep the side stream busy
        x.add_(1)
    x.record_stream(side)
    del x
    busy = not side.query()
    y = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
    reused_while_busy = y.data_ptr() == ptr
    del y
    side.synchronize()
    z = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
    reused_after = z.data_ptr() == ptr
    del z
    if busy:  # record_stream's promise (torch's allocator keeps it too)
        assert not reused_while_busy
    return {"busy": busy, "reused_while_busy": reused_while_busy, "reused_after": reused_after}


@section
def uncached_mode(torch, mode, ctx):
    """caching_allocator_enable(False): plain cudaMalloc, outside the stats."""
    stream = torch.cuda.current_stream().cuda_stream

    def counted(n):
        start = torch.cuda.memory_stats()["requested_bytes.all.allocated"]
        p = torch._C._cuda_cudaCachingAllocator_raw_alloc(n, stream)
        end = torch.cuda.memory_stats()["requested_bytes.all.allocated"]
        torch._C._cuda_cudaCachingAllocator_raw_delete(p)
        return end - start

    torch.cuda.caching_allocator_enable(False)
    try:
        off = counted(MiB)
        t = torch.ones(1000, device="cuda")
        t_sum = float(t.sum())
        del t
    finally:
        torch.cuda.caching_allocator_enable(True)
    on = counted(MiB)
    return {"counted_off": off, "counted_on": on, "sum": t_sum}


@section
def memory_fraction(torch, mode, ctx):
    torch.cuda.empty_cache()
    errs = []
    for bad in (-0.1, 2.0):
        try:
            torch.cuda.set_per_process_memory_fraction(bad)
        except Exception as e:
            errs.append(type(e).__name__)
    torch.cuda.set_per_process_memory_fraction(0.25)
    got = torch.cuda.get_per_process_memory_fraction()
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(int(total * 0.3), dtype=torch.uint8, device="cuda")
        over = "allocated"
    except torch.cuda.OutOfMemoryError:
        over = "OutOfMemoryError"
    torch.cuda.set_per_process_memory_fraction(1.0)
    return {"errors": errs, "fraction": got, "over": over}


@section
def graph_shared_pool(torch, mode, ctx):
    torch.cuda.empty_cache()
    base = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    static_in = torch.ones(1 << 20, device="cuda")
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, pool=pool):
        tmp = static_in * 2
        out1 = tmp + 1
        del tmp
    with torch.cuda.graph(g2, pool=pool):
        out2 = out1 * 3
    static_in.fill_(5)
    g1.replay()
    g2.replay()
    torch.cuda.synchronize()
    vals = (float(out1[0].item()), float(out2[0].item()))
    assert vals == (11.0, 33.0), vals
    in_pool = [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) != (0, 0)]
    assert in_pool, "no segment in a private pool"
    del g1, g2, out1, out2
    torch.cuda.empty_cache()
    left = torch.cuda.memory_reserved() - base
    return {"values": vals, "left_after_free": left}


@section
def graphed_callables(torch, mode, ctx):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).cuda()
    x = torch.randn(16, 64, device="cuda", requires_grad=True)
    ref = model(x).detach().clone()
    gm = torch.cuda.make_graphed_callables(model, (x,))
    y = gm(x)
    y.sum().backward()
    torch.cuda.synchronize()
    assert torch.allclose(y.detach(), ref, atol=1e-5)
    return {"out_sum": round(float(y.detach().sum().item()), 3)}


@section
def mempool(torch, mode, ctx):
    torch.cuda.empty_cache()
    base = torch.cuda.memory_reserved()
    pool = torch.cuda.MemPool()
    uc0 = pool.use_count()
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(6 * MiB, dtype=torch.uint8, device="cuda")
        uc_in = pool.use_count()
    y = torch.empty(6 * MiB, dtype=torch.uint8, device="cuda")
    segs = pool.snapshot()
    ptrs = {blk["address"] for s in segs for blk in s["blocks"] if blk["state"] == "active_allocated"}
    assert x.data_ptr() in ptrs and y.data_ptr() not in ptrs, (hex(x.data_ptr()), [hex(p) for p in ptrs])
    del x, y
    uc_after = pool.use_count()
    del pool  # the pool's segment goes; y's, in the default pool, stays cached
    after_del = torch.cuda.memory_reserved() - base
    torch.cuda.empty_cache()
    left = torch.cuda.memory_reserved() - base
    return {"use_counts": [uc0, uc_in, uc_after], "reserved_after_del_pool": after_del, "left_after_free": left}


PLUGGABLE_C = r"""
#include <cuda_runtime_api.h>
#include <stddef.h>
int dropin_allocs, dropin_frees;
void *dropin_alloc(size_t size, int device, void *stream) {
  void *p = NULL;
  (void)device, (void)stream;
  if (cudaMalloc(&p, size) != cudaSuccess) return NULL;
  dropin_allocs++;
  return p;
}
void dropin_free(void *ptr, size_t size, int device, void *stream) {
  (void)size, (void)device, (void)stream;
  cudaFree(ptr);
  dropin_frees++;
}
"""


def pluggable_lib(tmp):
    """A CUDAPluggableAllocator's library, built with the C compiler (torch's
    load_inline takes a minute); both passes share it."""
    so = os.path.join(tmp, "libdropin_alloc.so")
    if not os.path.exists(so):
        src = os.path.join(tmp, "dropin_alloc.c")
        with open(src, "w") as f:
            f.write(PLUGGABLE_C)
        cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I" + os.path.join(cuda, "include"), "-o", so + ".tmp", src,
                        "-L" + os.path.join(cuda, "lib64"), "-lcudart", "-Wl,-rpath," + os.path.join(cuda, "lib64")],
                       check=True, capture_output=True)
        os.replace(so + ".tmp", so)
    return so


@section
def mempool_options(torch, mode, ctx):
    """MemPool(no_split=True), MemPool(use_on_oom=True) and
    MemPool(allocator=...): the layouts, OOM outcomes and allocator calls
    of PyTorch's own MemPool tests, which must agree."""
    import ctypes

    def blocks(pool):
        segs = sorted(pool.snapshot(), key=lambda s: s["address"])
        return [[b["size"] for b in s["blocks"]] for s in segs]

    out = {}
    torch.cuda.empty_cache()
    # no_split: two 4 MiB tensors in each pool
    plain, whole = torch.cuda.MemPool(), torch.cuda.MemPool(no_split=True)
    keep = []
    for p in (plain, whole, plain, whole):
        with torch.cuda.use_mem_pool(p):
            keep.append(torch.empty(4 * MiB, dtype=torch.uint8, device="cuda"))
    out["no_split"] = {"plain": blocks(plain), "no_split": blocks(whole)}
    del keep, plain, whole
    torch.cuda.empty_cache()
    # use_on_oom: 80 MiB allowed beyond what is reserved now
    _, total = torch.cuda.mem_get_info(0)
    torch.cuda.set_per_process_memory_fraction((80 * MiB + torch.cuda.memory_reserved(0)) / total, 0)
    keep_pool, oom_pool = torch.cuda.MemPool(), torch.cuda.MemPool(use_on_oom=True)
    steps = []
    try:
        with torch.cuda.use_mem_pool(keep_pool):
            a = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
        with torch.cuda.use_mem_pool(oom_pool):
            b = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
        b_ptr = b.data_ptr()
        for size in (40, None, 30, 30):
            if size is None:
                del a, b
                steps.append("freed")
                continue
            try:
                c = torch.empty(size * MiB, dtype=torch.uint8, device="cuda")
                steps.append("got %d MiB%s" % (size, " at b" if c.data_ptr() == b_ptr else ""))
            except torch.cuda.OutOfMemoryError:
                steps.append("OOM %d MiB" % size)
        del c
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
    out["use_on_oom"] = steps
    del keep_pool, oom_pool
    torch.cuda.empty_cache()
    # allocator=: three 1 MiB tensors take two 2 MiB segments from it
    lib = ctypes.CDLL(pluggable_lib(ctx["tmp"]))
    allocs = ctypes.c_int.in_dll(lib, "dropin_allocs")
    frees = ctypes.c_int.in_dll(lib, "dropin_frees")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(lib._name, "dropin_alloc", "dropin_free")
    pool = torch.cuda.MemPool(alloc.allocator())
    with torch.cuda.use_mem_pool(pool):
        xs = [torch.ones(MiB // 4, device="cuda") for _ in range(3)]
    calls = [allocs.value, len(pool.snapshot())]
    total_sum = float(sum(x.sum().item() for x in xs))
    del xs
    del pool  # its destructor empties the pool's cache
    torch.cuda.synchronize()
    calls.append(frees.value)
    out["allocator"] = {"allocs, segments, frees": calls, "sum": total_sum}
    # PyTorch's test_tensor_delete_after_allocator_delete: the pool and the
    # allocator object go first; the tensor's segment goes back through the
    # allocator at the next empty_cache
    alloc2 = torch.cuda.memory.CUDAPluggableAllocator(lib._name, "dropin_alloc", "dropin_free")
    pool2 = torch.cuda.MemPool(alloc2.allocator())
    with torch.cuda.use_mem_pool(pool2):
        y = torch.full((MiB // 4,), 2.0, device="cuda")
    f0 = frees.value
    del pool2, alloc2
    f1 = frees.value
    y_sum = float(y.sum().item())
    del y
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    out["pool_and_allocator_first"] = {"frees at del pool, after empty_cache": [f1 - f0, frees.value - f0],
                                       "sum": y_sum}
    return out


@section
def empty_cache_in_pool(torch, mode, ctx):
    """torch.cuda.empty_cache() inside use_mem_pool, from threads as
    PyTorch's test_mempool_emptycache_multithread does: no error, the pools'
    segments and the default cache stay."""
    import threading
    keep = torch.empty(MiB, device="cuda")  # leaves a cached default segment
    del keep
    errors, reserved = [], []

    def work(pool):
        with torch.cuda.use_mem_pool(pool):
            x = torch.randn(4, device="cuda")
            del x
            r0 = torch.cuda.memory_reserved()
            try:
                torch.cuda.empty_cache()
            except RuntimeError as e:
                errors.append(str(e)[:300])
            reserved.append(torch.cuda.memory_reserved() >= r0)

    pools = [torch.cuda.MemPool() for _ in range(3)]
    threads = [threading.Thread(target=work, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work(pools[0])  # and on the main thread
    return {"errors": errors, "kept": reserved, "pool_segments": [len(p.snapshot()) for p in pools]}


@section
def cudnn_conv(torch, mode, ctx):
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1)
    x = torch.randn(8, 16, 32, 32)
    ref = conv(x)
    convc = conv.cuda()
    xc = x.cuda().requires_grad_()
    out = convc(xc)
    out.sum().backward()
    torch.cuda.synchronize()
    err = float((out.cpu() - ref).abs().max())
    assert err < 1e-3, err
    return {"ok": True, "grad_shape": list(xc.grad.shape)}


@section
def refused(torch, mode, ctx):
    x = torch.ones(10, device="cuda")
    try:
        x.untyped_storage()._share_cuda_()
        r = "shared"
    except NotImplementedError as e:
        assert "tcuda" in str(e), str(e)
        r = "refused"
    except Exception as e:  # native shares; anything else is a failure
        r = type(e).__name__
    if mode == "native":
        assert r == "shared", r
    else:
        assert r == "refused", r
    torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.7")
    if mode == "tcuda":
        import re
        import tcuda
        m = re.search(r"garbage_collection_threshold:([0-9.]+)", tcuda.get_allocator_settings())
        assert m and abs(float(m.group(1)) - 0.7) < 1e-9, tcuda.get_allocator_settings()
    # back to the default threshold: torch resets it when a setting omits it
    torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    return {}


@section
def install_after_cuda_use(torch, mode, ctx):
    """Runs once (in the native pass): fresh processes that turn tcuda on
    too late, just in time, and through TCUDA_TORCH_ALLOCATOR."""
    if mode != "native":
        return {}
    env = dict(os.environ)
    env.pop("TCUDA_TORCH_ALLOCATOR", None)

    def py(code, extra=None):
        e = dict(env, **(extra or {}))
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300)

    late = py("import torch, tcuda.torch as tt\nx = torch.ones(1, device='cuda')\n"
              "try:\n    tt.install()\nexcept tt.InstallError as e:\n    print('refused:', e)\n"
              "print(torch.cuda.get_allocator_backend(), float(x.sum()))")
    assert "refused:" in late.stdout and "already in use" in late.stdout, late.stdout + late.stderr[-2000:]
    assert late.stdout.strip().endswith("native 1.0"), late.stdout
    # CUDA initialised but no memory yet: still in time
    early = py("import torch, tcuda, tcuda.torch as tt\ntorch.cuda.init(); torch.cuda.current_device()\n"
               "tt.install()\nx = torch.ones(1 << 20, device='cuda')\n"
               "print(torch.cuda.get_allocator_backend(), tcuda.memory_allocated() == torch.cuda.memory_allocated() > 0)")
    assert early.stdout.strip() == "tcuda True", early.stdout + early.stderr[-2000:]
    hook = py("import tcuda.torch_hook\nimport torch\nx = torch.ones(4, device='cuda')\n"
              "print(torch.cuda.get_allocator_backend())", {"TCUDA_TORCH_ALLOCATOR": "1"})
    assert hook.stdout.strip() == "tcuda", hook.stdout + hook.stderr[-2000:]
    return {}


# ---- the driver ----

def run_mode(mode, only, tmp, cli):
    import torch
    if mode == "tcuda":
        import tcuda.torch
        tcuda.torch.install()
    ctx = {"tmp": tmp, "cli": cli}
    results = {}
    for fn in SECTIONS:
        if only and fn.__name__ not in only:
            continue
        # the same starting cache for both allocators (an OOM, which only the
        # tcuda pass provokes in oom_snapshot_env, flushes the cache)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        try:
            results[fn.__name__] = {"ok": True, "values": fn(torch, mode, ctx)}
        except Exception:
            results[fn.__name__] = {"ok": False, "error": traceback.format_exc()}
        torch.cuda.synchronize()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["native", "tcuda"])
    ap.add_argument("--json")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cli", default=os.environ.get("TCUDA_CLI"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    if a.mode:  # a child: one allocator
        res = run_mode(a.mode, only, os.path.dirname(a.json), a.cli)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
        return 0
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no GPU")
    except ImportError as e:
        print("SKIPPED: %s" % e)
        return 77
    tmp = a.out or tempfile.mkdtemp(prefix="torch_dropin_")
    os.makedirs(tmp, exist_ok=True)
    runs = {}
    for mode in ("native", "tcuda"):
        out = os.path.join(tmp, mode + ".json")
        env = dict(os.environ)
        env.pop("TCUDA_TORCH_ALLOCATOR", None)
        if mode == "tcuda":
            env["TCUDA_OOM_SNAPSHOT"] = os.path.join(tmp, "oom.pickle")
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--json", out]
        if a.cli:
            cmd += ["--cli", a.cli]
        if only:
            cmd += ["--only", ",".join(only)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        with open(os.path.join(tmp, mode + ".log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0 or not os.path.exists(out):
            print("FAIL: the %s run exited %d:\n%s" % (mode, r.returncode, (r.stdout + r.stderr)[-4000:]))
            return 1
        sys.stdout.write(r.stdout)
        with open(out) as f:
            runs[mode] = json.load(f)
    failed = 0
    for name in runs["native"]:
        n, t = runs["native"][name], runs["tcuda"].get(name)
        if not n["ok"]:
            print("FAIL %s (native):\n%s" % (name, n["error"]))
            failed += 1
        elif not t or not t["ok"]:
            print("FAIL %s (tcuda):\n%s" % (name, t["error"] if t else "not run"))
            failed += 1
        elif n["values"] != t["values"]:
            diff = {k: (n["values"].get(k), t["values"].get(k)) for k in set(n["values"]) | set(t["values"])
                    if n["values"].get(k) != t["values"].get(k)}
            print("FAIL %s: native != tcuda: %s" % (name, json.dumps(diff, default=str)[:3000]))
            failed += 1
        else:
            print("ok   %s" % name)
    print("RESULT torch_dropin sections=%d failed=%d" % (len(runs["native"]), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
