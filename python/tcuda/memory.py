"""The caching allocator: torch.cuda's memory management functions.

Stats, summary and snapshot describe every allocation made through tcuda,
including a PyTorch or CuPy program's when tcuda.interop routes it here.
"""
import collections
import inspect
import json
import os
import pickle
import sys
import tempfile
from ctypes import byref, c_double, c_int64, c_void_p

from ._device import _device_index, device_count, mem_get_info
from ._nvml import list_gpu_processes
from ._lib import HostMemoryStatsT, c_path, c_string, check, lib, pointer_arg, size_arg, take_string

__all__ = ["memory_stats", "memory_stats_as_nested_dict", "memory_summary", "memory_snapshot",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "memory_cached", "max_memory_cached", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "empty_cache",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "caching_allocator_alloc",
           "caching_allocator_delete", "record_stream", "set_allocator_settings", "get_allocator_settings",
           "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_peak_host_memory_stats",
           "reset_accumulated_host_memory_stats", "host_empty_cache", "empty_host_cache", "host_alloc", "host_free",
           "host_record_stream", "get_allocator_backend", "list_gpu_processes", "mem_get_info"]
# Also torch's private history names: _record_memory_history, _snapshot, _dump_snapshot.


def _initialized():
    return bool(lib.tcuda_is_initialized())


def memory_stats(device=None):
    """An OrderedDict with PyTorch's dotted keys, sorted, as torch.cuda.memory_stats().
    Empty before tcuda is initialised (no CUDA call yet, or no CUDA), as torch's."""
    dev = _device_index(device)
    if not _initialized():
        return collections.OrderedDict()
    out = c_void_p()
    check(lib.tcuda_memory_stats_json(dev, byref(out)))
    flat = json.loads(take_string(out))
    return collections.OrderedDict(sorted(flat.items()))


def memory_stats_as_nested_dict(device=None):
    nested = {}
    for key, value in memory_stats(device).items():
        d = nested
        parts = key.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = value
    return nested


def memory_summary(device=None, abbreviated=False):
    out = c_void_p()
    check(lib.tcuda_memory_summary(_device_index(device), 1 if abbreviated else 0, byref(out)))
    return take_string(out)


def memory_snapshot():
    """Segments of every device, as torch.cuda.memory_snapshot() (a list of
    dicts; segment_pool_id a tuple, as torch's)."""
    out = c_void_p()
    check(lib.tcuda_memory_snapshot_json(byref(out)))
    return _segments_from_json(take_string(out))


def _segments_from_json(text):
    # JSON has no tuples: segment_pool_id comes back as a list
    segments = json.loads(text)
    for seg in segments:
        if isinstance(seg.get("segment_pool_id"), list):
            seg["segment_pool_id"] = tuple(seg["segment_pool_id"])
    return segments


def _query(fn):
    # torch reads memory_stats(device).get(key, 0): 0 before initialisation.
    def query(device=None):
        dev = _device_index(device)
        if not _initialized():
            return 0
        v = c_int64()
        check(fn(dev, byref(v)))
        return v.value
    query.__name__ = fn.__name__[len("tcuda_"):]
    return query


memory_allocated = _query(lib.tcuda_memory_allocated)
max_memory_allocated = _query(lib.tcuda_max_memory_allocated)
memory_reserved = _query(lib.tcuda_memory_reserved)
max_memory_reserved = _query(lib.tcuda_max_memory_reserved)
memory_cached = _query(lib.tcuda_memory_cached)
max_memory_cached = _query(lib.tcuda_max_memory_cached)


def reset_peak_memory_stats(device=None):
    check(lib.tcuda_reset_peak_memory_stats(_device_index(device)))


def reset_accumulated_memory_stats(device=None):
    check(lib.tcuda_reset_accumulated_memory_stats(_device_index(device)))


def reset_max_memory_allocated(device=None):
    check(lib.tcuda_reset_max_memory_allocated(_device_index(device)))


def reset_max_memory_cached(device=None):
    check(lib.tcuda_reset_max_memory_cached(_device_index(device)))


def empty_cache():
    check(lib.tcuda_empty_cache())


def set_per_process_memory_fraction(fraction, device=None):
    """torch's checks and messages first: a float (an int is a TypeError), in
    [0, 1] (else ValueError)."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    check(lib.tcuda_set_per_process_memory_fraction(fraction, _device_index(device)))


def get_per_process_memory_fraction(device=None):
    f = c_double()
    check(lib.tcuda_get_per_process_memory_fraction(_device_index(device), byref(f)))
    return f.value


def caching_allocator_alloc(size, device=None, stream=None):
    """Device memory from the cache, as an int address; torch's signature.
    It belongs to `stream` (default: the current stream of the device)."""
    from .streams import current_stream
    size = size_arg(size)
    if stream is None:
        stream = current_stream(device)
    dev = _device_index(device)
    if dev == -1:
        dev = stream.device
    p = c_void_p()
    check(lib.tcuda_malloc_on(byref(p), size, dev, stream._s))
    return p.value or 0


def caching_allocator_delete(mem_ptr):
    check(lib.tcuda_free(pointer_arg(mem_ptr, "mem_ptr")))


def record_stream(mem_ptr, stream):
    """Tensor.record_stream for an address from caching_allocator_alloc."""
    check(lib.tcuda_record_stream(pointer_arg(mem_ptr, "mem_ptr"), stream._s))


def set_allocator_settings(settings):
    """torch.cuda.memory._set_allocator_settings("key:value,..."). A bad
    string raises tcuda.ConfigError, a ValueError as torch's is."""
    check(lib.tcuda_allocator_set_config(c_string(settings, "settings")))


def get_allocator_settings():
    out = c_void_p()
    check(lib.tcuda_allocator_get_config(byref(out)))
    return take_string(out)


def get_allocator_backend():
    """torch.cuda.get_allocator_backend(): "native" (the only backend tcuda has)."""
    for item in get_allocator_settings().split(","):
        key, _, value = item.partition(":")
        if key.strip() == "backend":
            return value.strip()
    return "native"


# ---- pinned host memory (PyTorch's caching host allocator) ----

# torch >= 2.10 key -> field of tcuda_host_memory_stats_t. The C names are
# torch 2.7-2.9's; torch renamed them, and "allocated_bytes" changed meaning:
# it is now the pool's bytes (tcuda's reserved_bytes), not the handed-out ones.
_HOST_STAT_KEYS = (("allocations", "segment"), ("allocated_bytes", "reserved_bytes"),
                   ("active_requests", "allocation"), ("active_bytes", "allocated_bytes"))


def host_memory_stats_as_nested_dict():
    """torch's nested form of host_memory_stats(); {} before tcuda is initialised, as torch's."""
    if not _initialized():
        return {}
    return _host_stats_nested()


def _host_stats_nested():
    s = HostMemoryStatsT()
    check(lib.tcuda_host_memory_stats(byref(s)))
    out = {}
    for key, field in _HOST_STAT_KEYS:
        st = getattr(s, field)
        out[key] = {"current": st.current, "peak": st.peak, "allocated": st.allocated, "freed": st.freed}
    for key in ("host_alloc_time", "host_free_time"):
        d = getattr(s, key)
        out[key] = {"total": d.total, "max": d.max, "min": d.min, "count": d.count, "avg": d.avg}
    out["num_host_alloc"] = s.num_host_alloc
    out["num_host_free"] = s.num_host_free
    return out


def host_memory_stats():
    """torch.cuda.host_memory_stats(): an OrderedDict with torch 2.10+'s dotted
    keys, sorted. allocations / allocated_bytes: the pinned blocks the cache
    owns (in use or cached); active_requests / active_bytes: blocks handed out
    and not yet reusable; num_host_alloc / num_host_free: cudaHostAlloc /
    cudaFreeHost calls; host_alloc_time / host_free_time: their durations in
    microseconds. Peaks are exact (torch sums per-size peaks for the active
    stats). Empty before tcuda is initialised, as torch's."""
    return _flatten(host_memory_stats_as_nested_dict())


def _flatten(nested):
    """{"a": {"b": 1}} -> OrderedDict({"a.b": 1}), keys sorted, as torch's."""
    flat = []

    def walk(prefix, obj):
        for k, v in obj.items():
            if isinstance(v, dict):
                walk(prefix + k + ".", v)
            else:
                flat.append((prefix + k, v))
    walk("", nested)
    return collections.OrderedDict(sorted(flat))


def reset_peak_host_memory_stats():
    check(lib.tcuda_host_reset_peak_memory_stats())


def reset_accumulated_host_memory_stats():
    check(lib.tcuda_host_reset_accumulated_memory_stats())


def host_empty_cache():
    """Give every reusable cached pinned block back to CUDA (torch:
    torch._C._host_emptyCache, torch.accelerator.memory.empty_host_cache)."""
    check(lib.tcuda_host_empty_cache())


empty_host_cache = host_empty_cache


def host_alloc(size):
    """Page-locked host memory from the cache, as an int address (0 for size
    0); what torch.empty(..., pin_memory=True) takes from torch's cache."""
    size = size_arg(size)
    p = c_void_p()
    check(lib.tcuda_host_alloc(byref(p), size))
    return p.value or 0


def host_free(ptr):
    """Return a host_alloc block; reused once the streams named in
    host_record_stream are done with it."""
    check(lib.tcuda_host_free(pointer_arg(ptr, "ptr")))


def host_record_stream(ptr, stream):
    """Work on `stream` uses the host_alloc block at ptr (torch records this
    on every non_blocking copy from pinned memory)."""
    check(lib.tcuda_host_record_stream(pointer_arg(ptr, "ptr"), stream._s))


# ---- memory history and snapshots (torch.cuda.memory's private names) ----

_HISTORY_RING_MAX = 1 << 40  # tcuda_memory_record_history's largest ring; more means no limit (0)


def _record_memory_history(enabled="all", *args, **kwargs):
    """torch.cuda.memory._record_memory_history: record every allocator event
    of every device (alloc, free_requested, free_completed, segment_alloc,
    segment_free, segment_map/unmap, oom, snapshot) for _snapshot() and
    _dump_snapshot(). torch's signature; enabled=True/False takes the legacy
    one. enabled: "all" (a history of max_entries events), "state" (one
    event) or None (stop, discarding the history). stacks="all" keeps C
    call stacks where torch's context puts frames: "all" on every event,
    "alloc" on allocations (a block's frees show its allocation stack, a
    segment's free the segment's), "state" on live blocks only; tcuda sees
    no Python frames, so stacks="python" keeps none. Initialises CUDA, as
    torch's."""
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                                clear_history=False, compile_context=False, global_record_annotations=False,
                                skip_actions=None, record_pinned_host_memory=False, record_cuda=True):
    # compile_context and global_record_annotations add torch.compile and
    # profiler annotations, which tcuda has none of; device is ignored by
    # torch too (every device records).
    if enabled not in (None, "state", "all"):
        raise RuntimeError("expected enabled to be 'state', 'all', or None, got %r" % (enabled,))
    if context not in (None, "state", "alloc", "all"):
        raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None, got %r" % (context,))
    if stacks not in ("python", "all"):
        raise RuntimeError("expected stacks to be 'python', or 'all', got %r" % (stacks,))
    n = size_arg(max_entries, "max_entries") if enabled == "all" else 1
    mode = _STACK_MODES.get(context, 0) if stacks == "all" else 0
    _record(enabled is not None and bool(record_cuda), n, mode, clear_history, skip_actions,
            record_pinned_host_memory)


def _record_memory_history_legacy(enabled, record_context=True, trace_alloc_max_entries=1,
                                  trace_alloc_record_context=False, device=None, record_context_cpp=False,
                                  clear_history=False, compile_context=False, global_record_annotations=False,
                                  skip_actions=None, record_pinned_host_memory=False, record_cuda=True):
    n = size_arg(trace_alloc_max_entries, "trace_alloc_max_entries")
    # torch's legacy mapping: trace_alloc_record_context is "alloc", else record_context is "state"
    context = "alloc" if trace_alloc_record_context else "state" if record_context else None
    mode = _STACK_MODES.get(context, 0) if record_context_cpp else 0
    _record(enabled and bool(record_cuda), n, mode, clear_history, skip_actions, record_pinned_host_memory)


_record_memory_history.__signature__ = inspect.signature(_record_memory_history_impl)

# torch's context -> tcuda_memory_record_history's stacks
_STACK_MODES = {"all": 1, "alloc": 2, "state": 3}


def _record(enabled, max_entries, stacks, clear_history, skip_actions, record_pinned_host_memory):
    if skip_actions:
        raise NotImplementedError("tcuda: skip_actions is not supported: the history records every action")
    if record_pinned_host_memory:
        raise NotImplementedError("tcuda: record_pinned_host_memory is not supported: the pinned host "
                                  "allocator keeps no history")
    check(lib.tcuda_init())
    # torch keeps at least one entry; 0 is no limit for libtcuda
    ring = 0 if max_entries >= _HISTORY_RING_MAX else max(1, max_entries)
    for d in range(device_count()):
        if clear_history or not enabled:
            check(lib.tcuda_memory_record_history(d, 0, 0, 0))
        if enabled:
            check(lib.tcuda_memory_record_history(d, 1, ring, stacks))


def _snapshot(device=None, augment_with_fx_traces=False):
    """torch.cuda.memory._snapshot(): {"segments": [...], "device_traces":
    [one list of events per device], "allocator_settings": {...}}, the
    document _dump_snapshot() writes. Works without CUDA (nothing in it).
    Frames are C frames, so there are no FX frames to augment."""
    with tempfile.TemporaryDirectory(prefix="tcuda-snapshot-") as d:
        path = os.path.join(d, "snapshot.pickle")
        check(lib.tcuda_memory_snapshot_dump(c_path(path)))
        with open(path, "rb") as f:
            return pickle.load(f)  # written by libtcuda just now: plain dicts, lists, tuples and numbers


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    """torch.cuda.memory._dump_snapshot(): _snapshot() as a pickle at
    filename, for pytorch.org/memory_viz, torch.cuda._memory_viz and
    `tcuda viz`. A failed write leaves no partial file."""
    check(lib.tcuda_memory_snapshot_dump(c_path(filename, "filename")))
