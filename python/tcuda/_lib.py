"""Finding and loading libtcuda, its C types, and TcudaError.

ctypes only: installing the package needs no compiler, and the library is
the one the C API documents (include/tcuda.h).
"""
import ctypes
import ctypes.util
import glob
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_size_t,
                    c_ssize_t, c_ubyte, c_uint, c_uint64, c_void_p)

__all__ = ["lib", "library_path", "TcudaError", "OutOfMemoryError", "check", "StreamT", "StatT", "HostMemoryStatsT",
           "GraphPoolT", "GraphScopeT", "WhatifOptionsT", "size_arg", "int_arg", "int64_arg", "uint64_arg",
           "pointer_arg", "c_string", "c_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """(where, path) in search order; see docs/python.md."""
    env = os.environ.get("TCUDA_LIBRARY")
    if env:
        # An explicit choice is final: falling through would hide a typo.
        return [("TCUDA_LIBRARY", env)]
    out = [("bundled", p) for p in sorted(glob.glob(os.path.join(_HERE, "libtcuda.so*")))]
    repo = os.path.dirname(os.path.dirname(_HERE))  # python/tcuda -> the repository
    out.append(("repository build", os.path.join(repo, "build", "src", "libtcuda.so")))
    found = ctypes.util.find_library("tcuda")
    out.append(("system", found or "libtcuda.so"))
    return out


def _load():
    tried = []
    for where, path in _candidates():
        if where != "system" and where != "TCUDA_LIBRARY" and not os.path.exists(path):
            tried.append("%s: %s (missing)" % (where, path))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s: %s (%s)" % (where, path, e))
    raise ImportError(
        "tcuda: cannot load libtcuda.so. Tried:\n  " + "\n  ".join(tried) +
        "\nBuild it (cmake -S . -B build && cmake --build build, in the tcuda repository) and either "
        "reinstall the package (pip install --no-build-isolation ./python bundles build/src/libtcuda.so) "
        "or set TCUDA_LIBRARY=/path/to/libtcuda.so. `pip install .` in the repository builds and bundles it "
        "(without CUDA where there is no CUDA toolkit).")


lib, _path = _load()


def library_path():
    """Absolute path of the libtcuda that this package uses."""
    if os.sep in _path:
        return os.path.abspath(_path)
    # Loaded by soname from the system paths: ask the loader where it is.
    class _DlInfo(Structure):
        _fields_ = [("fname", c_char_p), ("fbase", c_void_p), ("sname", c_char_p), ("saddr", c_void_p)]
    info = _DlInfo()
    dl = ctypes.CDLL(None)
    if dl.dladdr(ctypes.cast(lib.tcuda_version, c_void_p), ctypes.byref(info)) and info.fname:
        return os.path.abspath(info.fname.decode())
    return _path


# ---- errors ----

TCUDA_ERROR_NOT_AVAILABLE = 3
TCUDA_ERROR_OUT_OF_MEMORY = 6
TCUDA_ERROR_CONFIG = 9


class TcudaError(RuntimeError):
    """A failed tcuda call: str() is tcuda's message, .status the code,
    .name the status name (e.g. "TCUDA_ERROR_INVALID_DEVICE")."""

    def __init__(self, message, status, name):
        super().__init__(message)
        self.status = status
        self.name = name


class OutOfMemoryError(TcudaError):
    """torch.cuda.OutOfMemoryError's counterpart (status TCUDA_ERROR_OUT_OF_MEMORY)."""


class ConfigError(TcudaError, ValueError):
    """A bad allocator settings string (status TCUDA_ERROR_CONFIG): also a
    ValueError, which is what torch raises for one."""


def error_from(status):
    status = int(status)
    name = lib.tcuda_status_name(status).decode()
    msg = (lib.tcuda_last_error() or b"").decode("utf-8", "replace") or name
    cls = {TCUDA_ERROR_OUT_OF_MEMORY: OutOfMemoryError, TCUDA_ERROR_CONFIG: ConfigError}.get(status, TcudaError)
    return cls(msg, status, name)


def check(status):
    if status:
        raise error_from(status)


def take_string(ptr):
    """A char* the library allocated, as str; frees it."""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.tcuda_string_free(ptr)


# ---- arguments for C ----
# ctypes wraps a Python int that does not fit the C type (2**64 becomes a
# size_t of 0, -1 becomes SIZE_MAX) and c_char_p stops at the first NUL,
# both silently. Every value a caller hands to C goes through one of these.

def _bits_max(ctype):
    return (1 << (8 * ctypes.sizeof(ctype))) - 1


_SIZE_MAX = _bits_max(c_size_t)
_PTR_MAX = _bits_max(c_void_p)
_INT_MAX = _bits_max(c_int) >> 1


def _ranged(value, lo, hi, what, cname):
    v = int(value)
    if v < lo and lo == 0:
        raise ValueError("tcuda: %s %d is negative" % (what, v))
    if not lo <= v <= hi:
        raise OverflowError("tcuda: %s %d does not fit in %s (%d to %d)" % (what, v, cname, lo, hi))
    return v


def size_arg(value, what="size"):
    """A size_t: ValueError when negative, OverflowError past SIZE_MAX."""
    return _ranged(value, 0, _SIZE_MAX, what, "size_t")


def int_arg(value, what):
    return _ranged(value, -_INT_MAX - 1, _INT_MAX, what, "int")


def int64_arg(value, what):
    return _ranged(value, -(1 << 63), (1 << 63) - 1, what, "int64_t")


def uint64_arg(value, what):
    return _ranged(value, 0, (1 << 64) - 1, what, "uint64_t")


def pointer_arg(value, what="pointer"):
    """An address as an int, or None for 0 (ctypes passes None as NULL)."""
    return _ranged(value, 0, _PTR_MAX, what, "a pointer") or None


def c_string(value, what):
    """str (UTF-8) or bytes for a const char* that must arrive whole."""
    b = value if isinstance(value, bytes) else str(value).encode()
    if b"\0" in b:
        raise ValueError("tcuda: %s %r contains a NUL character, where C would cut it" % (what, value))
    return b


def c_path(value, what="path"):
    """A file name (str, bytes or os.PathLike) for a const char*."""
    b = os.fsencode(value)
    if b"\0" in b:
        raise ValueError("tcuda: %s %r contains a NUL character, where C would cut it" % (what, value))
    return b


# ---- C types ----

class StreamT(Structure):
    _fields_ = [("handle", c_void_p), ("id", c_int64), ("device", c_int), ("priority", c_int)]


class DeviceGuardT(Structure):
    _fields_ = [("prev_device", c_int), ("device", c_int)]


class StreamGuardT(Structure):
    _fields_ = [("active", c_int), ("prev_device", c_int), ("prev_stream", StreamT),
                ("prev_dst_stream", StreamT), ("stream", StreamT)]


class DevicePropertiesT(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char * 256), ("major", c_int), ("minor", c_int),
                ("total_memory", c_size_t), ("multi_processor_count", c_int),
                ("max_threads_per_multi_processor", c_int), ("l2_cache_size", c_int), ("warp_size", c_int),
                ("is_integrated", c_int), ("is_multi_gpu_board", c_int), ("uuid", c_ubyte * 16),
                ("uuid_string", c_char * 41), ("pci_domain_id", c_int), ("pci_bus_id", c_int),
                ("pci_device_id", c_int), ("pci_bus_string", c_char * 16)]


class StatT(Structure):
    _fields_ = [("current", c_int64), ("peak", c_int64), ("allocated", c_int64), ("freed", c_int64)]


class DurationStatT(Structure):
    _fields_ = [("total", c_int64), ("max", c_int64), ("min", c_int64), ("count", c_int64), ("avg", c_double)]


class HostMemoryStatsT(Structure):
    _fields_ = [("allocation", StatT), ("segment", StatT), ("allocated_bytes", StatT), ("reserved_bytes", StatT),
                ("host_alloc_time", DurationStatT), ("host_free_time", DurationStatT),
                ("num_host_alloc", c_int64), ("num_host_free", c_int64)]


class GraphPoolT(Structure):
    _fields_ = [("id", c_uint64 * 2)]


class GraphScopeT(Structure):
    _fields_ = [("graph", c_void_p), ("guard", StreamGuardT), ("active", c_int)]


class WhatifOptionsT(Structure):
    _fields_ = [("struct_size", c_size_t), ("configs", POINTER(c_char_p)), ("num_configs", c_size_t),
                ("capacity", c_uint64), ("memory_fraction", c_double), ("device", c_int), ("threads", c_int),
                ("series_points", c_int), ("no_min_limit", c_int), ("max_input_bytes", c_uint64),
                ("work_budget", c_uint64), ("progress", c_void_p), ("progress_user", c_void_p)]


P = POINTER
S = c_int  # tcuda_status

# Every TCUDA_API function of include/tcuda.h is here or in _UNBOUND;
# tests/python/check_bindings.py checks both against the header.
_PROTOTYPES = {
    # errors
    "tcuda_status_name": (c_char_p, [c_int]),
    "tcuda_last_error": (c_char_p, []),
    "tcuda_last_status": (c_int, []),
    "tcuda_clear_error": (None, []),
    "tcuda_string_free": (None, [c_void_p]),
    "tcuda_size_parse": (S, [c_char_p, P(c_uint64)]),
    # version and devices
    "tcuda_version": (c_int, []),
    "tcuda_version_string": (c_char_p, []),
    "tcuda_runtime_version": (c_int, []),
    "tcuda_driver_version": (c_int, []),
    "tcuda_nccl_version": (c_int, []),
    "tcuda_get_arch_list": (c_char_p, []),
    "tcuda_get_gencode_flags": (c_char_p, []),
    "tcuda_is_available": (c_int, []),
    "tcuda_unavailable_reason": (c_char_p, []),
    "tcuda_init": (S, []),
    "tcuda_is_initialized": (c_int, []),
    "tcuda_device_count": (c_int, []),
    "tcuda_current_device": (S, [P(c_int)]),
    "tcuda_set_device": (S, [c_int]),
    "tcuda_device_guard_begin": (S, [P(DeviceGuardT), c_int]),
    "tcuda_device_guard_end": (S, [P(DeviceGuardT)]),
    "tcuda_device_of": (S, [c_void_p, P(c_int)]),
    "tcuda_get_device_properties": (S, [c_int, P(DevicePropertiesT)]),
    "tcuda_get_device_name": (S, [c_int, c_char_p, c_size_t]),
    "tcuda_get_device_capability": (S, [c_int, P(c_int), P(c_int)]),
    "tcuda_synchronize": (S, [c_int]),
    "tcuda_mem_get_info": (S, [c_int, P(c_size_t), P(c_size_t)]),
    "tcuda_can_device_access_peer": (S, [c_int, c_int, P(c_int)]),
    # streams
    "tcuda_stream_priority_range": (S, [P(c_int), P(c_int)]),
    "tcuda_stream_from_pool": (S, [c_int, c_int, P(StreamT)]),
    "tcuda_stream_external": (S, [c_void_p, c_int, P(StreamT)]),
    "tcuda_default_stream": (S, [c_int, P(StreamT)]),
    "tcuda_current_stream": (S, [c_int, P(StreamT)]),
    "tcuda_set_stream": (S, [StreamT]),
    "tcuda_stream_guard_begin": (S, [P(StreamGuardT), StreamT]),
    "tcuda_stream_guard_end": (S, [P(StreamGuardT)]),
    "tcuda_stream_query": (S, [StreamT, P(c_int)]),
    "tcuda_stream_synchronize": (S, [StreamT]),
    "tcuda_stream_get_priority": (S, [StreamT, P(c_int)]),
    "tcuda_stream_wait_event": (S, [StreamT, c_void_p]),
    "tcuda_stream_wait_stream": (S, [StreamT, StreamT]),
    # events
    "tcuda_event_create": (S, [c_uint, P(c_void_p)]),
    "tcuda_event_destroy": (None, [c_void_p]),
    "tcuda_event_record": (S, [c_void_p, P(StreamT)]),
    "tcuda_event_wait": (S, [c_void_p, P(StreamT)]),
    "tcuda_event_query": (S, [c_void_p, P(c_int)]),
    "tcuda_event_synchronize": (S, [c_void_p]),
    "tcuda_event_elapsed_time": (S, [c_void_p, c_void_p, P(c_float)]),
    "tcuda_event_ipc_handle": (S, [c_void_p, c_char * 64]),
    "tcuda_event_from_ipc_handle": (S, [c_int, c_char_p, c_size_t, P(c_void_p)]),
    "tcuda_event_handle": (c_void_p, [c_void_p]),
    "tcuda_event_device": (c_int, [c_void_p]),
    "tcuda_event_flags": (c_uint, [c_void_p]),
    # allocator
    "tcuda_malloc_on": (S, [P(c_void_p), c_size_t, c_int, StreamT]),
    "tcuda_free": (S, [c_void_p]),
    "tcuda_record_stream": (S, [c_void_p, StreamT]),
    "tcuda_empty_cache": (S, []),
    "tcuda_memory_stats_json": (S, [c_int, P(c_void_p)]),
    "tcuda_memory_allocated": (S, [c_int, P(c_int64)]),
    "tcuda_max_memory_allocated": (S, [c_int, P(c_int64)]),
    "tcuda_memory_reserved": (S, [c_int, P(c_int64)]),
    "tcuda_max_memory_reserved": (S, [c_int, P(c_int64)]),
    "tcuda_memory_cached": (S, [c_int, P(c_int64)]),
    "tcuda_max_memory_cached": (S, [c_int, P(c_int64)]),
    "tcuda_reset_peak_memory_stats": (S, [c_int]),
    "tcuda_reset_accumulated_memory_stats": (S, [c_int]),
    "tcuda_reset_max_memory_allocated": (S, [c_int]),
    "tcuda_reset_max_memory_cached": (S, [c_int]),
    "tcuda_set_per_process_memory_fraction": (S, [c_double, c_int]),
    "tcuda_get_per_process_memory_fraction": (S, [c_int, P(c_double)]),
    "tcuda_memory_summary": (S, [c_int, c_int, P(c_void_p)]),
    "tcuda_memory_snapshot_json": (S, [P(c_void_p)]),
    "tcuda_allocator_set_config": (S, [c_char_p]),
    "tcuda_allocator_get_config": (S, [P(c_void_p)]),
    # memory history (torch.cuda.memory._record_memory_history, _snapshot, _dump_snapshot)
    "tcuda_memory_record_history": (S, [c_int, c_int, c_size_t, c_int]),
    "tcuda_memory_snapshot_dump": (S, [c_char_p]),
    # what-if on PyTorch memory snapshots (tcuda.whatif)
    "tcuda_whatif_file": (S, [c_char_p, P(WhatifOptionsT), P(c_void_p)]),
    "tcuda_whatif_buffer": (S, [c_char_p, c_size_t, P(WhatifOptionsT), P(c_void_p)]),
    "tcuda_whatif_compare_files": (S, [c_char_p, c_char_p, P(WhatifOptionsT), P(c_void_p)]),
    # pinned host memory
    "tcuda_host_alloc": (S, [P(c_void_p), c_size_t]),
    "tcuda_host_free": (S, [c_void_p]),
    "tcuda_host_record_stream": (S, [c_void_p, StreamT]),
    "tcuda_host_empty_cache": (S, []),
    "tcuda_host_memory_stats": (S, [P(HostMemoryStatsT)]),
    "tcuda_host_reset_peak_memory_stats": (S, []),
    "tcuda_host_reset_accumulated_memory_stats": (S, []),
    # interop entry points (resolved for their addresses)
    "tcuda_torch_malloc": (c_void_p, [c_ssize_t, c_int, c_void_p]),
    "tcuda_torch_free": (None, [c_void_p, c_ssize_t, c_int, c_void_p]),
    "tcuda_cupy_malloc": (c_void_p, [c_void_p, c_size_t, c_int]),
    "tcuda_cupy_free": (None, [c_void_p, c_void_p, c_int]),
    # RNG
    "tcuda_dtype_size": (c_size_t, [c_int]),
    "tcuda_dtype_name": (c_char_p, [c_int]),
    "tcuda_default_generator": (S, [c_int, P(c_void_p)]),
    "tcuda_generator_create": (S, [c_int, c_uint64, P(c_void_p)]),
    "tcuda_generator_destroy": (S, [c_void_p]),
    "tcuda_generator_device": (c_int, [c_void_p]),
    "tcuda_generator_get_state": (S, [c_void_p, c_ubyte * 16]),  # TCUDA_RNG_STATE_SIZE
    "tcuda_generator_set_state": (S, [c_void_p, c_char_p, c_size_t]),
    "tcuda_generator_manual_seed": (S, [c_void_p, c_uint64]),
    "tcuda_generator_seed": (S, [c_void_p, P(c_uint64)]),
    "tcuda_generator_initial_seed": (S, [c_void_p, P(c_uint64)]),
    "tcuda_generator_get_offset": (S, [c_void_p, P(c_uint64)]),
    "tcuda_generator_set_offset": (S, [c_void_p, c_uint64]),
    "tcuda_get_rng_state": (S, [c_int, c_ubyte * 16]),
    "tcuda_set_rng_state": (S, [c_int, c_char_p, c_size_t]),
    "tcuda_get_rng_state_all": (S, [c_void_p, c_size_t]),
    "tcuda_set_rng_state_all": (S, [c_char_p, c_size_t]),
    "tcuda_manual_seed": (S, [c_uint64]),
    "tcuda_manual_seed_all": (S, [c_uint64]),
    "tcuda_seed": (S, []),
    "tcuda_seed_all": (S, []),
    "tcuda_initial_seed": (S, [c_int, P(c_uint64)]),
    "tcuda_rand_uniform": (S, [c_void_p, c_void_p, c_size_t, c_int, c_double, c_double, P(StreamT)]),
    "tcuda_rand_normal": (S, [c_void_p, c_void_p, c_size_t, c_int, c_double, c_double, P(StreamT)]),
    "tcuda_rand_random": (S, [c_void_p, c_void_p, c_size_t, c_int, P(StreamT)]),
    "tcuda_rand_randint": (S, [c_void_p, c_void_p, c_size_t, c_int, c_int64, c_int64, P(StreamT)]),
    "tcuda_rand_random_from": (S, [c_void_p, c_void_p, c_size_t, c_int, c_int64, P(StreamT)]),
    # collectives (tensors are DLTensor*, passed as addresses)
    "tcuda_comm_set_engine": (S, [c_int]),
    "tcuda_comm_get_engine": (S, [P(c_int)]),
    "tcuda_comm_broadcast": (S, [c_void_p, P(c_int), c_size_t, P(c_void_p)]),
    "tcuda_comm_broadcast_out": (S, [c_void_p, P(c_void_p), c_size_t]),
    "tcuda_comm_broadcast_coalesced": (S, [P(c_void_p), c_size_t, P(c_int), c_size_t, c_size_t, P(c_void_p)]),
    "tcuda_comm_reduce_add": (S, [P(c_void_p), c_size_t, c_int, P(c_void_p)]),
    "tcuda_comm_reduce_add_coalesced": (S, [P(c_void_p), c_size_t, c_size_t, c_int, c_size_t, P(c_void_p)]),
    "tcuda_comm_scatter": (S, [c_void_p, P(c_int), c_size_t, P(c_int64), c_size_t, c_int64, P(P(StreamT)),
                               P(c_void_p), P(c_size_t)]),
    "tcuda_comm_scatter_out": (S, [c_void_p, P(c_void_p), c_size_t, c_int64, P(P(StreamT))]),
    "tcuda_comm_gather": (S, [P(c_void_p), c_size_t, c_int64, c_int, P(c_void_p)]),
    "tcuda_comm_gather_out": (S, [P(c_void_p), c_size_t, c_int64, c_void_p]),
    # CUDA graphs (graph handles are opaque pointers)
    "tcuda_graph_capture_mode_from_name": (S, [c_char_p, P(c_int)]),
    "tcuda_graph_create": (S, [P(c_void_p)]),
    "tcuda_graph_destroy": (S, [c_void_p]),
    "tcuda_graph_capture_begin": (S, [c_void_p, P(GraphPoolT), c_int]),
    "tcuda_graph_capture_end": (S, [c_void_p]),
    "tcuda_graph_replay": (S, [c_void_p, P(StreamT)]),
    "tcuda_graph_reset": (S, [c_void_p]),
    "tcuda_graph_pool": (S, [c_void_p, P(GraphPoolT)]),
    "tcuda_graph_num_nodes": (S, [c_void_p, P(c_size_t)]),
    "tcuda_graph_exec_handle": (c_void_p, [c_void_p]),
    "tcuda_graph_enable_debug_mode": (None, []),
    "tcuda_graph_debug_dump": (S, [c_void_p, c_char_p]),
    "tcuda_graph_register_generator": (S, [c_void_p, c_void_p]),
    "tcuda_graph_pool_handle": (S, [P(GraphPoolT)]),
    "tcuda_is_current_stream_capturing": (S, [P(c_int)]),
    "tcuda_graph_capture_scope_begin": (S, [P(GraphScopeT), c_void_p, P(GraphPoolT), P(StreamT), c_int]),
    "tcuda_graph_capture_scope_end": (S, [P(GraphScopeT)]),
    # cuBLAS and IPC
    "tcuda_current_blas_handle": (S, [P(c_void_p)]),
    "tcuda_ipc_collect": (S, []),
    # NVTX
    "tcuda_nvtx_range_push": (c_int, [c_char_p]),
    "tcuda_nvtx_range_pop": (c_int, []),
    "tcuda_nvtx_mark": (S, [c_char_p]),
    "tcuda_nvtx_range_start": (S, [c_char_p, P(c_uint64)]),
    "tcuda_nvtx_range_end": (S, [c_uint64]),
}

# Exported by libtcuda but deliberately not bound here, with the reason.
_UNBOUND = {
    "tcuda_input_read": "the package hands paths to the library, whose readers read them the same way",
    "tcuda_replay_file_to": "C-only by design, as tcuda_replay_file: it streams a trace replay to a C callback",
    "tcuda_replay_snapshot_to": "streams a snapshot's replay to a C callback, as tcuda_replay_file_to (the "
                                "`tcuda replay --simulate` command's); tcuda.whatif covers snapshots from Python",
    "tcuda_viz_file": "the data of the `tcuda viz` page, in a format of its own; from Python the page is "
                      "made by that command",
    "tcuda_status_string": "the package raises tcuda_last_error()'s message; the generic one-line description "
                           "of a status adds nothing to it",
    "tcuda_device_exchange": "torch's counterpart (torch.cuda._exchange_device) is private; tcuda.device() uses "
                             "the device guard",
    "tcuda_device_maybe_exchange": "torch's counterpart (torch.cuda._maybe_exchange_device) is private; "
                                   "tcuda.device() uses the device guard, which restores the same way",
    "tcuda_device_selftest": "a build check for `tcuda info` and the C tests; torch.cuda has no counterpart",
    "tcuda_stream_create": "torch.cuda.Stream hands out pool streams (tcuda_stream_from_pool); dedicated "
                           "streams the caller destroys are a C-only addition",
    "tcuda_stream_destroy": "only for tcuda_stream_create's streams, which are not bound",
    "tcuda_stream_record_event": "Stream.record_event records through tcuda_event_record, as torch's does",
    "tcuda_malloc": "caching_allocator_alloc names its device and stream, so it uses tcuda_malloc_on",
    "tcuda_memory_stats": "memory_stats() reads the same numbers with torch's dotted keys from "
                          "tcuda_memory_stats_json",
    "tcuda_memory_snapshot": "memory_snapshot() reads the same segments as torch's dicts from "
                             "tcuda_memory_snapshot_json",
    "tcuda_snapshot_free": "frees tcuda_memory_snapshot's result, which is not bound",
    "tcuda_memory_stats_summary": "formats a replay's stats; memory_summary() uses tcuda_memory_summary",
    "tcuda_oom_observer_add": "takes a C callback that runs on the allocating thread; torch's counterpart "
                              "(torch._C._cuda_attach_out_of_memory_observer) is private",
    "tcuda_oom_observer_remove": "removes a tcuda_oom_observer_add observer, which is not bound",
    "tcuda_replay_file": "trace replay is the `tcuda replay` command's; torch.cuda has no counterpart",
    "tcuda_replay_string": "trace replay is the `tcuda replay` command's; torch.cuda has no counterpart",
    "tcuda_rand_fill_host": "a host fill for `tcuda rand` without a GPU and for C tests; torch.cuda has no "
                            "counterpart (torch's CPU generator makes other numbers)",
    "tcuda_history_action_name": "memory._snapshot() gets the action names in tcuda_memory_snapshot_dump's "
                                 "document",
    "tcuda_memory_history": "memory._snapshot() gets the same entries, with their frames, in "
                            "tcuda_memory_snapshot_dump's document",
    "tcuda_memory_snapshot_dump_json": "memory._snapshot() and _dump_snapshot() use the pickle, torch's format "
                                       "(tuples stay tuples; torch has no JSON form)",
    "tcuda_memory_history_free": "frees tcuda_memory_history's result, which is not bound",
    "tcuda_blas_clear_workspaces": "torch's counterpart (torch._C._cuda_clearCublasWorkspaces) is private",
    "tcuda_ipc_export": "torch shares CUDA memory between processes through torch.multiprocessing, not "
                        "torch.cuda; tcuda's IPC is C-only for now",
    "tcuda_ipc_import": "see tcuda_ipc_export",
    "tcuda_ipc_close": "see tcuda_ipc_export",
    "tcuda_dtype_from_name": "the package maps DLPack dtypes to tcuda_dtype itself (_dlpack._TO_TCUDA)",
    "tcuda_graph_capture_fn": "takes a C callback; from Python, tcuda.graph() captures (torch's "
                              "make_graphed_callables needs autograd)",
    "tcuda_comm_unique_id": "multi-process NCCL (torch.cuda.nccl.unique_id/init_rank and the rank "
                            "collectives) is C-only for now (docs/comm-multinode.md)",
    "tcuda_comm_init_rank": "see tcuda_comm_unique_id",
    "tcuda_comm_destroy": "see tcuda_comm_unique_id",
    "tcuda_comm_info": "see tcuda_comm_unique_id",
    "tcuda_comm_broadcast_rank": "see tcuda_comm_unique_id",
    "tcuda_comm_reduce_rank": "see tcuda_comm_unique_id",
    "tcuda_comm_all_reduce_rank": "see tcuda_comm_unique_id",
    "tcuda_history_set_thread_context": "for torch's glue (tcuda.torch, C++), which attaches torch's gathered "
                                        "frames to history entries; Python frames need no C ids",
    "tcuda_history_set_context_hooks": "see tcuda_history_set_thread_context",
    "tcuda_pool_begin_allocate": "torch's CUDAGraph and MemPool reach it through tcuda.torch's C++ glue; "
                                 "tcuda.graph() routes its captures itself",
    "tcuda_pool_end_allocate": "see tcuda_pool_begin_allocate",
    "tcuda_pool_release": "see tcuda_pool_begin_allocate",
    "tcuda_pool_retain": "see tcuda_pool_begin_allocate",
    "tcuda_pool_use_count": "see tcuda_pool_begin_allocate",
    "tcuda_pool_set_allocator": "see tcuda_pool_begin_allocate (torch's MemPool(allocator=...), through the glue)",
    "tcuda_pool_set_use_on_oom": "see tcuda_pool_begin_allocate (torch's MemPool(use_on_oom=True), through the glue)",
    "tcuda_pool_set_no_split": "see tcuda_pool_begin_allocate (torch's MemPool(no_split=True), through the glue)",
    "tcuda_pool_empty_unused": "see tcuda_pool_begin_allocate (torch's MemPool destructor, through the glue)",
}

for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError("tcuda: %s has no %s: it is older than this package; rebuild libtcuda"
                          % (library_path(), _name)) from None
    _fn.restype = _res
    _fn.argtypes = _args
