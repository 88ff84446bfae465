"""torch.cuda.nvtx: ranges and marks that show up in Nsight Systems."""
import contextlib
from ctypes import byref, c_uint64

from ._lib import c_string, check, error_from, lib, uint64_arg

__all__ = ["mark", "range_push", "range_pop", "range_start", "range_end", "range"]


def range_push(msg):
    """Push a range; returns its zero-based depth."""
    d = lib.tcuda_nvtx_range_push(c_string(msg, "range name"))
    if d < 0:
        raise error_from(lib.tcuda_last_status())
    return d


def range_pop():
    """Pop the innermost range; returns the depth of the range ended.
    Popping with no range open raises (torch returns -1)."""
    d = lib.tcuda_nvtx_range_pop()
    if d < 0:
        raise error_from(lib.tcuda_last_status())
    return d


def mark(msg):
    check(lib.tcuda_nvtx_mark(c_string(msg, "mark")))


def range_start(msg):
    """A range that may end on another thread; returns its id."""
    rid = c_uint64()
    check(lib.tcuda_nvtx_range_start(c_string(msg, "range name"), byref(rid)))
    return rid.value


def range_end(range_id):
    check(lib.tcuda_nvtx_range_end(uint64_arg(range_id, "range_id")))


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """with tcuda.nvtx.range("step {}", i): ..."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
