"""The caching allocator: torch.cuda's memory management functions.

Stats, summary and snapshot describe every allocation made through tcuda,
including a PyTorch or CuPy program's when tcuda.interop routes it here.
"""
import collections
import json
from ctypes import byref, c_double, c_int64, c_void_p

from ._device import _device_index
from ._lib import check, lib, take_string

__all__ = ["memory_stats", "memory_stats_as_nested_dict", "memory_summary", "memory_snapshot",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "memory_cached", "max_memory_cached", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "empty_cache",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "caching_allocator_alloc",
           "caching_allocator_delete", "record_stream", "set_allocator_settings", "get_allocator_settings"]


def memory_stats(device=None):
    """An OrderedDict with PyTorch's dotted keys, sorted, as torch.cuda.memory_stats()."""
    out = c_void_p()
    check(lib.tcuda_memory_stats_json(_device_index(device), byref(out)))
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
    """Segments of every device, as torch.cuda.memory_snapshot() (a list of dicts)."""
    out = c_void_p()
    check(lib.tcuda_memory_snapshot_json(byref(out)))
    return json.loads(take_string(out))


def _query(fn):
    def query(device=None):
        v = c_int64()
        check(fn(_device_index(device), byref(v)))
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
    check(lib.tcuda_set_per_process_memory_fraction(float(fraction), _device_index(device)))


def get_per_process_memory_fraction(device=None):
    f = c_double()
    check(lib.tcuda_get_per_process_memory_fraction(_device_index(device), byref(f)))
    return f.value


def caching_allocator_alloc(size, device=None, stream=None):
    """Device memory from the cache, as an int address; torch's signature.
    It belongs to `stream` (default: the current stream of the device)."""
    from .streams import current_stream
    if stream is None:
        stream = current_stream(device)
    dev = _device_index(device)
    if dev == -1:
        dev = stream.device
    p = c_void_p()
    check(lib.tcuda_malloc_on(byref(p), int(size), dev, stream._s))
    return p.value or 0


def caching_allocator_delete(mem_ptr):
    check(lib.tcuda_free(int(mem_ptr) or None))


def record_stream(mem_ptr, stream):
    """Tensor.record_stream for an address from caching_allocator_alloc."""
    check(lib.tcuda_record_stream(int(mem_ptr) or None, stream._s))


def set_allocator_settings(settings):
    """torch.cuda.memory._set_allocator_settings("key:value,...")."""
    check(lib.tcuda_allocator_set_config(settings.encode()))


def get_allocator_settings():
    out = c_void_p()
    check(lib.tcuda_allocator_get_config(byref(out)))
    return take_string(out)

