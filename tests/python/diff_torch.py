"""Differential test: one script, run against torch.cuda and against tcuda
in two subprocesses, whose outputs must be equal: devices, streams, events,
RNG values and states, memory stats/summary/snapshot for the same request
sequence, pinned host memory stats, CUDA graphs (capture, replay, pools,
errors), comm results, NVTX depths, the shape of current_blas_handle(),
ipc_collect() and the memory history, and what torch's names and tcuda's
raise and write for the same inputs (section "names").

    python3 diff_torch.py                       # compare; exit 1 on a difference
    python3 diff_torch.py --backend torch|tcuda  # one side, JSON out

A section that raises is recorded under "errors" (traceback on stderr) and
the others still run, so one run shows every difference. "_info" holds
values printed side by side but not compared (timings, torch's known
approximations).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import traceback

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
    # the title names the library (tcuda's spec); every other line must match
    lines = cuda.memory_summary(0).splitlines()
    if len(lines) > 1:
        lines[1] = lines[1].strip("| ").replace("PyTorch CUDA", "tcuda CUDA", 1)
    out["summary"] = "\n".join(lines)
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


# ---- pinned host memory ----

# torch 2.7-2.9 host stat names -> torch 2.10+ names (what tcuda reports).
# "allocated_bytes" changed meaning between them, so map from the old dict.
_OLD_HOST_NAMES = {"segment": "allocations", "reserved_bytes": "allocated_bytes", "allocation": "active_requests",
                   "allocated": "active_requests", "allocated_bytes": "active_bytes"}


def _canonical_host_stats(d):
    d = dict(d)
    if any(k.startswith("active_requests.") for k in d):
        return d, "torch>=2.10 names"
    out = {}
    for k, v in d.items():
        head, dot, rest = k.partition(".")
        out[_OLD_HOST_NAMES.get(head, head) + dot + rest if dot else k] = v
    return out, "torch<=2.9 names, renamed"


def _torch_fn(torch, *names):
    """The first of torch.cuda.X, torch.cuda.memory.X, torch.accelerator.memory.X, torch._C.X that exists."""
    for name in names:
        for owner in ("cuda", "cuda.memory", "accelerator.memory", "_C"):
            obj = torch
            for part in owner.split("."):
                obj = getattr(obj, part, None)
            if obj is not None and hasattr(obj, name):
                return getattr(obj, name)
    raise AttributeError("torch has none of %s" % ", ".join(names))


# Keys whose meaning is the same in torch and tcuda: the pool (blocks the
# cache owns), the CUDA call counts, and the handouts. The active stats'
# current/peak/freed are only shown: torch sums per-size peaks, and torch
# 2.10/2.11 never lowers them when a block without stream uses is freed
# (a torch bug, fixed in releases after 2.11).
def _host_compared(key):
    head, _, metric = key.partition(".")
    if head in ("allocations", "allocated_bytes") or key in ("num_host_alloc", "num_host_free"):
        return True
    if head in ("active_requests", "active_bytes"):
        return metric == "allocated"
    return metric == "count"  # host_alloc_time / host_free_time: counts, not durations


def host_section(torch, cuda, tcuda_mode, out, info):
    """The same pinned request sequence: torch.empty(pin_memory=True) against
    tcuda.host_alloc. No block is used on a stream, so frees are immediate
    on both sides."""
    if tcuda_mode:
        import tcuda
        alloc, free, stats = tcuda.host_alloc, tcuda.host_free, tcuda.host_memory_stats
        empty, reset_peak = tcuda.host_empty_cache, tcuda.reset_peak_host_memory_stats
        reset_acc = tcuda.reset_accumulated_host_memory_stats
    else:
        live = {}

        def alloc(n):
            t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            live[t.data_ptr()] = t
            return t.data_ptr()

        def free(p):
            del live[p]  # the only reference: torch gives the block back now
        stats = _torch_fn(torch, "host_memory_stats")
        empty = _torch_fn(torch, "host_empty_cache", "empty_host_cache", "_host_emptyCache")
        reset_peak = _torch_fn(torch, "reset_peak_host_memory_stats")
        reset_acc = _torch_fn(torch, "reset_accumulated_host_memory_stats")
    r, shown = {"snaps": {}}, {}

    def snap(name):
        d, scheme = _canonical_host_stats(stats())
        r["keys"] = sorted(d)
        r["snaps"][name] = {k: v for k, v in d.items() if _host_compared(k)}
        shown[name] = {k: v for k, v in d.items() if not _host_compared(k) and not k.endswith(("avg", "total",
                                                                                               "max", "min"))}
        shown["scheme"] = scheme if not tcuda_mode else "tcuda"

    empty()
    reset_acc()
    reset_peak()
    snap("start")
    ptrs = [alloc(n) for n in (1000, 4096, 4097, 100, MiB, 3 * MiB)]  # buckets 1K 4K 8K 128 1M 4M
    snap("all_live")
    for p in ptrs[::2]:
        free(p)
    snap("half_freed")
    again = [alloc(n) for n in (1024, 8000, 5 * MiB)]  # two cache hits, one new 8M block
    snap("reuse")
    for p in ptrs[1::2] + again:
        free(p)
    snap("all_freed")
    empty()
    snap("emptied")
    reset_peak()
    reset_acc()
    snap("reset")
    out["host"] = r
    info["host_active_stats"] = shown


# ---- CUDA graphs ----

def _error_kind(call, phrase, info, name):
    """("RuntimeError"|type name|"no error", phrase found in the message)."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the kind is what is compared
        info[name] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return ["RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__, phrase in str(e)]
    info[name] = "no error"
    return ["no error", False]


def graph_section(torch, cuda, tcuda_mode, out, info):
    """Capture an RNG fill and a pool allocation with torch.cuda.graph and
    tcuda.graph on each one's side stream, replay, compare with eager fills."""
    if tcuda_mode:
        import tcuda

        def fill(t):
            tcuda.uniform_(t)  # on tcuda's current stream: the capture stream inside the graph

        def sync():
            tcuda.synchronize()
            torch.cuda.synchronize()
    else:
        def fill(t):
            t.uniform_()

        def sync():
            torch.cuda.synchronize()

    def state():
        s = cuda.get_rng_state()
        return list(bytes(s) if isinstance(s, (bytes, bytearray)) else s.tolist())

    r = {"capturing_outside": cuda.is_current_stream_capturing()}
    n = 1 << 16
    static, eager, static2 = (torch.zeros(n, device="cuda") for _ in range(3))
    torch.cuda.synchronize()
    cuda.manual_seed(2024)
    r["state_before"] = state()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        fill(static)
        r["capturing_inside"] = cuda.is_current_stream_capturing()
        p = cuda.caching_allocator_alloc(3 * MiB)  # served from the graph's private pool
    r["capturing_after"] = cuda.is_current_stream_capturing()
    sync()
    r["untouched_by_capture"] = bool((static == 0).all().item())
    r["state_after_capture"] = state()
    pool = tuple(g.pool())
    r["pool_shape"] = [pool[0] > 0, pool[1] == 0]  # a graph's own pool: (uid, 0)
    r["pool_segments"] = sorted([s["total_size"], [(b["size"], b["state"]) for b in s["blocks"]]]
                                for s in cuda.memory_snapshot()
                                if tuple(s.get("segment_pool_id", (0, 0))) == pool)
    info["graph_pool"] = list(pool)
    cuda.caching_allocator_delete(p)  # back to the private pool, which the graph keeps

    digests, states = [], []
    for _ in range(2):
        g.replay()
        sync()
        digests.append(_digest(static))
        states.append(state())
    r["replay_digests"], r["replay_states"] = digests, states
    r["replays_differ"] = digests[0] != digests[1]  # graph-safe Philox: fresh numbers per replay
    cuda.manual_seed(2024)
    ref = []
    for _ in range(2):
        fill(eager)
        sync()
        ref.append(_digest(eager))
    r["replays_equal_eager_fills"] = digests == ref

    g2 = cuda.CUDAGraph()
    with cuda.graph(g2, pool=g.pool()):  # share g's pool
        fill(static2)
    r["shared_pool_is_gs"] = tuple(g2.pool()) == pool
    g2.replay()
    sync()
    r["shared_replay_digest"] = _digest(static2)
    h = tuple(cuda.graph_pool_handle())
    r["handle_shape"] = [h[0] == 0, h[1] > 0]  # a user pool: (0, uid)

    e = {}
    e["replay_empty"] = _error_kind(lambda: cuda.CUDAGraph().replay(), "without a preceding successful capture",
                                    info, "graph_err_replay_empty")
    e["bad_mode"] = _error_kind(lambda: cuda.CUDAGraph().capture_begin(capture_error_mode="bogus"),
                                "Unknown capture error mode", info, "graph_err_bad_mode")
    g.reset()
    e["replay_after_reset"] = _error_kind(g.replay, "without a preceding successful capture", info,
                                          "graph_err_replay_after_reset")
    g2.replay()  # g's reset leaves the shared pool to g2
    sync()
    r["shared_after_reset_digest"] = _digest(static2)

    def on_default_stream():
        with cuda.stream(cuda.default_stream()):
            cuda.CUDAGraph().capture_begin()
    # Last: torch has already run the RNG capture prologue when this check fails.
    e["default_stream"] = _error_kind(on_default_stream, "must be captured on a non-default stream", info,
                                      "graph_err_default_stream")
    r["errors"] = e
    out["graph"] = r


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


def nvtx_section(cuda, tcuda_mode, out, info):
    depths = [cuda.nvtx.range_push("a"), cuda.nvtx.range_push("b"), cuda.nvtx.range_pop(), cuda.nvtx.range_pop()]
    cuda.nvtx.mark("diff_torch")
    with cuda.nvtx.range("step {}", 1):
        pass
    out["nvtx"] = depths


def extras_section(cuda, out, info):
    """Names compared by shape, not value: the cuBLAS handle, ipc_collect and
    the memory history that _snapshot() returns for one alloc/free pair."""
    r = {}
    h = cuda.current_blas_handle()
    r["blas_handle"] = "nonzero int" if isinstance(h, int) and h else repr(h)
    r["ipc_collect"] = repr(cuda.ipc_collect())
    mem = cuda.memory
    mem._record_memory_history(max_entries=1000)
    p = cuda.caching_allocator_alloc(3 * MiB + 5, 0)
    cuda.caching_allocator_delete(p)
    snap = mem._snapshot()
    mem._record_memory_history(enabled=None)
    r["snapshot_keys"] = sorted(k for k in snap if k in ("segments", "device_traces", "allocator_settings"))
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    # block events only: whether a segment is made depends on what each
    # side's cache holds from earlier sections
    mine = [e for e in trace if e.get("addr") == p and e["action"] in ("alloc", "free_requested", "free_completed")]
    r["actions_for_the_block"] = [e["action"] for e in mine]
    r["alloc_size"] = [e["size"] for e in mine if e["action"] == "alloc"]
    r["entry_keys"] = sorted({k for e in mine for k in e} & {"action", "addr", "size", "stream"})
    info["trace_tail"] = [(e["action"], e.get("size")) for e in trace[-6:]]
    out["extras"] = r


def _raised(call):
    """The exception a call raises, as (type name, is a ValueError, message); None if none."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return [type(e).__name__ if type(e).__name__ in ("TypeError", "ValueError") else "other",
                isinstance(e, ValueError), str(e).splitlines()[0] if str(e) else ""]
    return None


def names_section(torch, cuda, tcuda_mode, out, info):
    """The same inputs to torch's names and tcuda's: exception types and
    messages, the snapshot's keys, pool ids, trace entries, where frames go
    per context mode, and the per_process_memory_fraction config key."""
    r = {}
    orig = cuda.get_per_process_memory_fraction(0)
    r["fraction_int"] = _raised(lambda: cuda.set_per_process_memory_fraction(1))
    r["fraction_low"] = _raised(lambda: cuda.set_per_process_memory_fraction(-0.1))
    r["fraction_high"] = _raised(lambda: cuda.set_per_process_memory_fraction(2.0))
    cuda.set_per_process_memory_fraction(orig, 0)
    setter = cuda.set_allocator_settings if tcuda_mode else torch._C._accelerator_setAllocatorSettings
    r["bad_settings_are_value_errors"] = [
        (_raised(lambda: setter(bad)) or [None, None])[1]
        for bad in ("foo:1,bar:2", "garbage_collection_threshold:1.2", "max_split_size_mb:2",
                    "release_lock_on_cudamalloc:none", "pinned_num_register_threads:1024")]
    mem = cuda.memory
    mem._record_memory_history(max_entries=1000)
    p = cuda.caching_allocator_alloc(3 * MiB + 5, 0)
    cuda.caching_allocator_delete(p)
    cuda.empty_cache()
    snap = mem._snapshot()
    mem._record_memory_history(enabled=None)
    r["snapshot_keys"] = list(snap)
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    r["entry_keys"] = sorted({tuple(e) for e in trace if e["action"] != "oom"})
    r["compile_context"] = sorted({e.get("compile_context") for e in trace})
    r["user_metadata"] = sorted({e.get("user_metadata") for e in trace})
    r["last_action"] = trace[-1]["action"] if trace else None
    r["pool_id_types"] = sorted({type(s["segment_pool_id"]).__name__ for s in cuda.memory_snapshot()})
    # frames per context mode, C++ stacks on both sides (tcuda has no Python frames)
    for context in ("state", "alloc", "all"):
        cuda.empty_cache()
        mem._record_memory_history("state" if context == "state" else "all", context=context, stacks="all")
        keep = cuda.caching_allocator_alloc(15 * MiB, 0)  # its segment stays
        gone = cuda.caching_allocator_alloc(12 * MiB, 0)  # a segment of its own, freed below
        cuda.caching_allocator_delete(gone)
        cuda.empty_cache()
        snap = mem._snapshot()
        mem._record_memory_history(enabled=None)
        cuda.caching_allocator_delete(keep)
        trace = snap["device_traces"][0] if snap["device_traces"] else []
        live = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == keep]
        seg_free = [e for e in trace if e["action"] == "segment_free"]
        # torch writes "frames" only on entries that carry a context
        # (none under "state", no snapshot entry ever): read it with get()
        r["frames_" + context] = {
            "live_block_has_frames": bool(live and live[0]["frames"]),
            "segment_free_has_frames": any(e.get("frames") for e in seg_free),
            "segment_free_names_empty_cache": any("empty_cache" in f["name"] for e in seg_free
                                                  for f in e.get("frames") or []),
            "entries_have_frames": any(e.get("frames") for e in trace),
            "actions_with_frames_key": sorted({e["action"] for e in trace if "frames" in e}),
            "actions_without_frames_key": sorted({e["action"] for e in trace if "frames" not in e})}
    cuda.empty_cache()
    # torch 2.11's allocator config key, read when the allocator starts
    code = ("import sys\nsys.path[:0] = %r\nimport torch\n" % sys.path[:3] +
            ("import tcuda as cuda\n" if tcuda_mode else "cuda = torch.cuda\n") +
            "print(cuda.get_per_process_memory_fraction(0))\n")
    got = []
    for value in ("0.5", "1.1"):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="per_process_memory_fraction:" + value)
        env.pop("TCUDA_ALLOC_CONF", None)
        pr = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        got.append(pr.stdout.strip() if pr.returncode == 0 else
                   "error: " + ("per_process_memory_fraction is invalid" in pr.stderr and "named" or pr.stderr[-200:]))
    r["fraction_key"] = got
    out["names"] = r


def run(backend):
    import torch
    tcuda_mode = backend == "tcuda"
    if tcuda_mode:
        import tcuda as cuda
    else:
        cuda = torch.cuda
    torch.cuda.init()
    out, info, errors = {}, {}, {}
    sections = [
        ("memory", lambda: memory_section(cuda, out)),  # first: nothing else has used either allocator
        ("host", lambda: host_section(torch, cuda, tcuda_mode, out, info)),  # before anything pins memory
        ("device", lambda: device_section(cuda, out)),
        ("events", lambda: event_section(cuda, out)),
        ("rng", lambda: rng_section(torch, cuda, tcuda_mode, out)),
        ("streams", lambda: stream_section(torch, cuda, out)),
        ("comm", lambda: comm_section(torch, cuda, tcuda_mode, out)),
        ("graph", lambda: graph_section(torch, cuda, tcuda_mode, out, info)),  # late: a failed capture stays local
        ("nvtx", lambda: nvtx_section(cuda, tcuda_mode, out, info)),
        ("extras", lambda: extras_section(cuda, out, info)),
        ("names", lambda: names_section(torch, cuda, tcuda_mode, out, info)),
    ]
    for name, fn in sections:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - record it, run the rest
            errors[name] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            sys.stderr.write("[%s] section %s raised:\n%s" % (backend, name, traceback.format_exc()))
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - a sticky CUDA error: later sections will say so
                pass
    out["errors"] = errors
    out["_info"] = info
    print(json.dumps(out, sort_keys=True, default=str))


lines_doc = []

# Where tcuda differs from torch on purpose (docs/python.md): each entry is
# (path, torch's value, tcuda's value), and both sides must hold exactly
# those values; anything else is a difference like any other.
DOCUMENTED = [
    # torch returns what the NVTX library returns: -2 from every push and
    # pop when no tool (nsys, ...) is attached, as here. tcuda returns the
    # zero-based depth its docs promise, tracked per thread.
    ("out.nvtx", [-2, -2, -2, -2], [0, 1, 1, 0]),
]


def documented(a, b, path):
    for p, ta, tb in DOCUMENTED:
        if p == path and a == ta and b == tb:
            return True
    return False


def diff(a, b, path, lines):
    if documented(a, b, path):
        lines_doc.append("%s: torch %r, tcuda %r (documented difference)" % (path, a, b))
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                v = json.dumps(a[k] if k in a else b[k], sort_keys=True, default=str)
                lines.append("%s.%s: only in %s: %s" % (path, k, "torch" if k in a else "tcuda",
                                                        v if len(v) <= 300 else v[:300] + "..."))
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
    res, stderr = {}, {}
    for b in ("torch", "tcuda"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--backend", b], capture_output=True,
                           text=True)
        stderr[b] = r.stderr
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        try:
            res[b] = json.loads(last)
        except ValueError:
            res[b] = None
        if r.returncode != 0 or res[b] is None:
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
            print("FAIL: the %s run failed (exit %d, %s)" % (b, r.returncode,
                                                             "no JSON line" if res[b] is None else "JSON written"))
            return 1
    for b in ("torch", "tcuda"):
        if res[b]["errors"]:
            print("---- %s stderr (sections raised) ----" % b)
            print(stderr[b][-6000:])
    info = {b: res[b].pop("_info", {}) for b in res}
    lines = []
    del lines_doc[:]
    diff(res["torch"], res["tcuda"], "out", lines)
    sections = sorted(set(res["torch"]) | set(res["tcuda"]))
    bad = sorted({ln.split(".")[1].split("[")[0].split(":")[0].split(" ")[0] for ln in lines})
    for s in sections:
        print("%s %s" % ("FAIL" if s in bad else "ok  ", s))
    for ln in lines[:120]:
        print("  " + ln)
    if len(lines) > 120:
        print("  ... %d more differences" % (len(lines) - 120))
    for ln in lines_doc:
        print("  " + ln)
    print("not compared (torch | tcuda):")
    for k in sorted(set(info["torch"]) | set(info["tcuda"])):
        a, b = info["torch"].get(k, "-"), info["tcuda"].get(k, "-")
        print("  %s:\n    torch: %s\n    tcuda: %s" % (k, json.dumps(a, sort_keys=True, default=str),
                                                      json.dumps(b, sort_keys=True, default=str)))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
