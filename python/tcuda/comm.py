"""torch.cuda.comm over DLPack: inputs are any objects with __dlpack__ or
__cuda_array_interface__ (torch, CuPy, NumPy for host sources); new outputs
are tcuda.Tensor objects (hand them to torch.from_dlpack / cupy.from_dlpack);
out= variants write into the given tensors and return them."""
import ctypes
from ctypes import byref, c_int, c_int64, c_size_t, c_void_p

from . import _dlpack
from ._device import _device_index
from ._lib import StreamT, check, int64_arg, lib, size_arg

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced", "scatter", "gather",
           "set_engine", "get_engine"]

_ENGINES = ("auto", "nccl", "copy")  # tcuda_comm_engine's values, in order


def set_engine(engine):
    """tcuda's own option (torch has none): 'nccl' always uses NCCL where
    PyTorch would, 'copy' never does, 'auto' (the default) decides per call."""
    if engine not in _ENGINES:
        raise ValueError("tcuda.comm.set_engine: engine %r is not one of %s" % (engine, ", ".join(_ENGINES)))
    check(lib.tcuda_comm_set_engine(_ENGINES.index(engine)))


def get_engine():
    """The engine in effect: 'auto', 'nccl' or 'copy'."""
    e = c_int(0)
    check(lib.tcuda_comm_get_engine(byref(e)))
    return _ENGINES[e.value]

BUFFER_SIZE = 10485760
_HOST = -2  # TCUDA_COMM_HOST


def _devices(devices):
    idx = [_device_index(d, optional=False) for d in devices]
    return (c_int * max(1, len(idx)))(*idx), len(idx)


def _outs(n):
    return (c_void_p * max(1, n))()


def broadcast(tensor, devices=None, *, out=None):
    """Copies of tensor on each device (the source device's slot views it)."""
    if (devices is None) == (out is None):
        raise RuntimeError("tcuda.comm.broadcast: exactly one of 'devices' and 'out' must be specified")
    src = _dlpack.Borrowed(tensor)
    if out is not None:
        outs = _dlpack.borrow_all(out)
        check(lib.tcuda_comm_broadcast_out(src.address, _dlpack.ptr_array(outs), len(outs)))
        return tuple(out)
    devs, n = _devices(devices)
    res = _outs(n)
    check(lib.tcuda_comm_broadcast(src.address, devs, n, res))
    return tuple(_dlpack.wrap_outputs(res[:n], [src]))


def broadcast_coalesced(tensors, devices, buffer_size=BUFFER_SIZE):
    """A tuple per device, each with the tensors in order (row 0 views the inputs)."""
    buffer_size = size_arg(buffer_size, "buffer_size")
    ins = _dlpack.borrow_all(tensors)
    devs, nd = _devices(devices)
    nt = len(ins)
    res = _outs(nd * nt)
    check(lib.tcuda_comm_broadcast_coalesced(_dlpack.ptr_array(ins), nt, devs, nd, buffer_size, res))
    flat = _dlpack.wrap_outputs(res[:nd * nt], ins)
    return tuple(tuple(flat[i * nt:(i + 1) * nt]) for i in range(nd))


def _destination(destination, allow_host):
    if destination is None:
        return -1
    if allow_host and (destination == -1 or destination == "cpu" or getattr(destination, "type", None) == "cpu"):
        return _HOST
    return _device_index(destination, optional=False)


def reduce_add(inputs, destination=None):
    """Elementwise sum of the inputs (one per GPU) on destination."""
    ins = _dlpack.borrow_all(inputs)
    res = _outs(1)
    check(lib.tcuda_comm_reduce_add(_dlpack.ptr_array(ins), len(ins), _destination(destination, False), res))
    return _dlpack.wrap_outputs(res[:1], ins)[0]


def reduce_add_coalesced(inputs, destination=None, buffer_size=BUFFER_SIZE):
    """inputs: one list of tensors per GPU; returns their sums, in order."""
    buffer_size = size_arg(buffer_size, "buffer_size")
    rows = [list(r) for r in inputs]
    ntensors = len(rows[0]) if rows else 0
    if any(len(r) != ntensors for r in rows):
        raise ValueError("tcuda.comm.reduce_add_coalesced: every GPU needs the same number of tensors")
    ins = _dlpack.borrow_all([t for r in rows for t in r])
    res = _outs(ntensors)
    check(lib.tcuda_comm_reduce_add_coalesced(_dlpack.ptr_array(ins), len(rows), ntensors,
                                              _destination(destination, False), buffer_size, res))
    return tuple(_dlpack.wrap_outputs(res[:ntensors], ins))


def _streams(streams, n):
    if streams is None:
        return None, []
    if len(streams) != n:
        raise ValueError("tcuda.comm.scatter: expected %d streams, got %d" % (n, len(streams)))
    structs = [None if s is None else StreamT.from_buffer_copy(s._s) for s in streams]
    arr = (ctypes.POINTER(StreamT) * max(1, n))(*[None if s is None else ctypes.pointer(s) for s in structs])
    return arr, structs


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """Chunks of tensor along dim, chunk i on devices[i]."""
    dim = int64_arg(dim, "dim")
    sizes = None if chunk_sizes is None else [int64_arg(c, "chunk size") for c in chunk_sizes]
    src = _dlpack.Borrowed(tensor)
    if out is not None:
        if devices is not None or chunk_sizes is not None:
            raise RuntimeError("tcuda.comm.scatter: 'devices' and 'chunk_sizes' must not be given with 'out'")
        outs = _dlpack.borrow_all(out)
        arr, keep = _streams(streams, len(outs))
        check(lib.tcuda_comm_scatter_out(src.address, _dlpack.ptr_array(outs), len(outs), dim, arr))
        return tuple(out)
    if devices is None:
        raise RuntimeError("tcuda.comm.scatter: 'devices' must be specified when 'out' is not")
    devs, n = _devices(devices)
    csz = None if sizes is None else (c_int64 * max(1, len(sizes)))(*sizes)
    arr, keep = _streams(streams, n)
    res, nout = _outs(n), c_size_t()
    check(lib.tcuda_comm_scatter(src.address, devs, n, csz, 0 if sizes is None else len(sizes), dim, arr,
                                 res, byref(nout)))
    return tuple(_dlpack.wrap_outputs(res[:nout.value], [src]))


def gather(tensors, dim=0, destination=None, *, out=None):
    """Concatenation along dim on destination: a device, None (current
    device), or -1 / "cpu" (pinned host memory, as torch)."""
    dim = int64_arg(dim, "dim")
    ins = _dlpack.borrow_all(tensors)
    if out is not None:
        if destination is not None:
            raise RuntimeError("tcuda.comm.gather: 'destination' must not be given with 'out'")
        o = _dlpack.Borrowed(out)
        check(lib.tcuda_comm_gather_out(_dlpack.ptr_array(ins), len(ins), dim, o.address))
        return out
    res = _outs(1)
    check(lib.tcuda_comm_gather(_dlpack.ptr_array(ins), len(ins), dim, _destination(destination, True), res))
    return _dlpack.wrap_outputs(res[:1], ins)[0]
