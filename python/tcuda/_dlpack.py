"""DLPack in and out, for any framework.

In: an object with __dlpack__ (torch, CuPy, NumPy, JAX) or
__cuda_array_interface__ becomes a DLTensor that the C API reads.
Out: the DLManagedTensors the C API returns become Tensor objects with
__dlpack__ (a PyCapsule named "dltensor"), __dlpack_device__ and, for the
dtypes it can describe, __cuda_array_interface__.
"""
import ctypes
from ctypes import POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p

from ._lib import DeviceGuardT, StreamT, check, lib

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_CUDA_TYPES = (kDLCUDA, kDLCUDAManaged)
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6
kDLFloat8_e4m3fn, kDLFloat8_e5m2 = 10, 12


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", _Deleter)]

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [c_void_p, c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]

# The same function taking a bare address: a capsule's destructor must not
# make a Python reference to the capsule being destroyed.
_capsule_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

_NAME = b"dltensor"  # PyCapsule keeps the pointer: this bytes object lives as long as the module

# (code, bits) <-> tcuda_dtype (include/tcuda.h) and CAI typestr.
_TO_TCUDA = {(kDLFloat, 32): 0, (kDLFloat, 64): 1, (kDLFloat, 16): 2, (kDLBfloat, 16): 3, (kDLInt, 8): 4,
             (kDLInt, 16): 5, (kDLInt, 32): 6, (kDLInt, 64): 7, (kDLUInt, 8): 8, (kDLBool, 8): 9,
             (kDLUInt, 16): 10, (kDLUInt, 32): 11, (kDLUInt, 64): 12, (kDLComplex, 32): 13,
             (kDLComplex, 64): 14, (kDLComplex, 128): 15, (kDLFloat8_e4m3fn, 8): 16, (kDLFloat8_e5m2, 8): 17}
_KIND = {"f": kDLFloat, "i": kDLInt, "u": kDLUInt, "b": kDLBool, "c": kDLComplex}
_KIND_BACK = {v: k for k, v in _KIND.items()}


def _stream_arg(device):
    """The DLPack `stream` value naming tcuda's current stream on device."""
    st = StreamT()
    check(lib.tcuda_current_stream(device, ctypes.byref(st)))
    return 1 if not st.handle else st.handle  # 1: the legacy default stream


def _capturing(device):
    """Is tcuda's current stream on device capturing a graph? Then no
    cross-stream wait may be added: CUDA rejects waiting inside a capture on
    an event recorded outside it, and the capture would be lost."""
    if not lib.tcuda_is_initialized():
        return False
    g = DeviceGuardT()
    check(lib.tcuda_device_guard_begin(ctypes.byref(g), device))
    try:
        c = c_int()
        check(lib.tcuda_is_current_stream_capturing(ctypes.byref(c)))
        return bool(c.value)
    finally:
        check(lib.tcuda_device_guard_end(ctypes.byref(g)))


def _raw_stream(value):
    """A DLPack / CAI stream integer as a cudaStream_t (None: no sync)."""
    if value is None or value == -1:
        return None
    return 0 if value == 1 else value  # 2 (per-thread default) is a valid handle as is


class Borrowed:
    """A DLTensor view of a foreign object, valid while this lives."""

    def __init__(self, obj, sync=True):
        self.obj = obj
        self._keep = []
        if isinstance(obj, Tensor):
            self.address = ctypes.addressof(obj._tensor)
            return
        err = None
        if hasattr(obj, "__dlpack__"):
            try:
                self._from_dlpack(obj, sync)
                return
            except (TypeError, BufferError, RuntimeError, ValueError) as e:  # e.g. torch's requires_grad refusal
                err = e
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None:
            if err is not None:
                raise err
            raise TypeError("tcuda: expected a tensor with __dlpack__ or __cuda_array_interface__, got %s"
                            % type(obj).__name__)
        self._from_cai(cai, sync)

    def _from_dlpack(self, obj, sync):
        dev_type, dev_id = obj.__dlpack_device__()
        if sync and dev_type in _CUDA_TYPES and _capturing(int(dev_id)):
            cap = obj.__dlpack__(stream=-1)  # DLPack's "no synchronization"
        elif sync and dev_type in _CUDA_TYPES:
            cap = obj.__dlpack__(stream=_stream_arg(int(dev_id)))
        else:
            cap = obj.__dlpack__()
        ptr = _api.PyCapsule_GetPointer(cap, _NAME)
        self._keep.append(cap)  # the capsule's destructor gives the tensor back to its producer
        self.address = ptr  # dl_tensor is the first member of DLManagedTensor

    def _from_cai(self, cai, sync):
        shape = tuple(int(x) for x in cai["shape"])
        typestr = cai["typestr"]
        kind, size = typestr[1], int(typestr[2:])
        if kind not in _KIND or typestr[0] == ">":
            raise TypeError("tcuda: unsupported __cuda_array_interface__ typestr %r" % typestr)
        ptr = int(cai["data"][0])
        t = DLTensor()
        t.data = ptr or None
        dev = c_int(0)
        if ptr:
            check(lib.tcuda_device_of(ptr, ctypes.byref(dev)))
        else:
            check(lib.tcuda_current_device(ctypes.byref(dev)))
        t.device = DLDevice(kDLCUDA, dev.value)
        t.ndim = len(shape)
        t.dtype = DLDataType(_KIND[kind], size * 8, 1)
        shp = (c_int64 * max(1, len(shape)))(*shape)
        t.shape = ctypes.cast(shp, POINTER(c_int64))
        strides = cai.get("strides")
        if strides is not None:
            st = (c_int64 * max(1, len(shape)))(*[int(s) // size for s in strides])
            t.strides = ctypes.cast(st, POINTER(c_int64))
            self._keep.append(st)
        self._keep += [t, shp]
        self.address = ctypes.addressof(t)
        stream = _raw_stream(cai.get("stream")) if sync and cai.get("version", 0) >= 3 else None
        if stream is not None and not _capturing(dev.value):
            # The producer's work on `stream` must finish before tcuda's stream reads the data.
            mine, other = StreamT(), StreamT()
            check(lib.tcuda_current_stream(dev.value, ctypes.byref(mine)))
            check(lib.tcuda_stream_external(stream, dev.value, ctypes.byref(other)))
            if (mine.handle or 0) != (other.handle or 0):
                check(lib.tcuda_stream_wait_stream(mine, other))

    @property
    def tensor(self):
        return DLTensor.from_address(self.address)


def borrow_all(objs):
    return [Borrowed(o) for o in objs]


def ptr_array(borrowed):
    return (c_void_p * max(1, len(borrowed)))(*[b.address for b in borrowed])


def tcuda_dtype(t):
    """tcuda_dtype of a DLTensor; TypeError for one tcuda does not know."""
    if t.dtype.lanes != 1 or (t.dtype.code, t.dtype.bits) not in _TO_TCUDA:
        raise TypeError("tcuda: unsupported DLPack dtype (code %d, bits %d, lanes %d)"
                        % (t.dtype.code, t.dtype.bits, t.dtype.lanes))
    return _TO_TCUDA[(t.dtype.code, t.dtype.bits)]


def is_contiguous(t):
    if not t.strides:
        return True
    expect = 1
    for i in reversed(range(t.ndim)):
        if t.shape[i] != 1 and t.strides[i] != expect:
            return False
        expect *= t.shape[i]
    return True


def numel(t):
    n = 1
    for i in range(t.ndim):
        n *= t.shape[i]
    return n


# ---- out: Tensor ----

_exports = {}  # address of an exported DLManagedTensor -> (struct, Tensor): alive until the consumer is done


@_Deleter
def _export_deleter(m):
    try:
        _exports.pop(ctypes.addressof(m.contents), None)
    except Exception:  # interpreter shutdown
        pass


@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(cap):
    # Never consumed (still named "dltensor"): we own the tensor.
    try:
        if _api.PyCapsule_IsValid(cap, _NAME):
            _exports.pop(_capsule_pointer_raw(cap, _NAME), None)
    except Exception:
        pass


class Tensor:
    """A tensor tcuda made (a collective's output). Hand it to any framework:
    torch.from_dlpack(t), cupy.from_dlpack(t), numpy.from_dlpack(t) for host
    results, or cupy.asarray(t) through __cuda_array_interface__. Every export
    shares the memory and keeps it alive. New memory is tcuda's and goes back
    to tcuda's caching allocator when the last user is gone."""

    def __init__(self, managed_address, keep=()):
        self._m = ctypes.cast(managed_address, POINTER(DLManagedTensor))
        self._tensor = self._m.contents.dl_tensor
        self._keep = list(keep)  # inputs a view may point into

    def __del__(self):
        m = getattr(self, "_m", None)
        if m:
            self._m = None
            try:
                m.contents.deleter(m)
            except Exception:
                pass

    @property
    def shape(self):
        t = self._tensor
        return tuple(t.shape[i] for i in range(t.ndim))

    @property
    def strides(self):
        """In elements, as torch's Tensor.stride()."""
        t = self._tensor
        if not t.strides:
            out, acc = [], 1
            for n in reversed(self.shape):
                out.append(acc)
                acc *= n
            return tuple(reversed(out))
        return tuple(t.strides[i] for i in range(t.ndim))

    @property
    def dtype(self):
        """torch's dtype name, e.g. "float32"."""
        return lib.tcuda_dtype_name(tcuda_dtype(self._tensor)).decode()

    @property
    def device(self):
        """The CUDA device index, or -1 for host memory."""
        d = self._tensor.device
        return d.device_id if d.device_type in _CUDA_TYPES else -1

    def data_ptr(self):
        t = self._tensor
        return (t.data or 0) + t.byte_offset

    def __dlpack_device__(self):
        d = self._tensor.device
        return (d.device_type, d.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tcuda.Tensor.__dlpack__: copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("tcuda.Tensor.__dlpack__: cannot export to device %r" % (dl_device,))
        dev_type, dev_id = self.__dlpack_device__()
        raw = _raw_stream(stream) if dev_type in _CUDA_TYPES else None
        if raw is not None:
            self._order_before(dev_id, raw)
        m = DLManagedTensor()
        m.dl_tensor = self._tensor  # a copy of the descriptor; shape and strides stay ours
        m.deleter = _export_deleter
        addr = ctypes.addressof(m)
        _exports[addr] = (m, self)
        return _api.PyCapsule_New(addr, _NAME, ctypes.cast(_capsule_destructor, c_void_p))

    def _order_before(self, device, raw):
        """Make the consumer's stream wait for tcuda's work on this tensor."""
        mine, theirs = StreamT(), StreamT()
        check(lib.tcuda_current_stream(device, ctypes.byref(mine)))
        if (mine.handle or 0) == raw:
            return
        check(lib.tcuda_stream_external(raw or None, device, ctypes.byref(theirs)))
        check(lib.tcuda_stream_wait_stream(theirs, mine))

    @property
    def __cuda_array_interface__(self):
        t = self._tensor
        if t.device.device_type not in _CUDA_TYPES or t.dtype.code not in _KIND_BACK or t.dtype.lanes != 1:
            raise AttributeError("__cuda_array_interface__: not a CUDA tensor of a dtype it can describe")
        size = t.dtype.bits // 8
        mine = StreamT()
        check(lib.tcuda_current_stream(t.device.device_id, ctypes.byref(mine)))
        return {"shape": self.shape, "typestr": ("|" if size == 1 else "<") + _KIND_BACK[t.dtype.code] + str(size),
                "data": (self.data_ptr(), False), "version": 3,
                "strides": None if is_contiguous(t) else tuple(s * size for s in self.strides),
                "stream": mine.handle or 1}

    def __repr__(self):
        where = "cpu" if self.device < 0 else "cuda:%d" % self.device
        return "tcuda.Tensor(shape=%s, dtype=%s, device=%s)" % (self.shape, self.dtype, where)


def wrap_outputs(addresses, keep):
    return [Tensor(a, keep) for a in addresses]
