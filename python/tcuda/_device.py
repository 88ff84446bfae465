"""Devices: torch.cuda's device functions and context managers."""
import ctypes
from ctypes import byref, c_int, c_size_t, c_void_p

from ._lib import DeviceGuardT, DevicePropertiesT, check, int_arg, lib

__all__ = ["is_available", "is_initialized", "init", "device_count", "current_device", "set_device", "device",
           "device_of", "get_device_name", "get_device_capability", "get_device_properties", "synchronize",
           "mem_get_info", "can_device_access_peer", "get_arch_list", "get_gencode_flags", "unavailable_reason",
           "current_blas_handle", "ipc_collect", "is_bf16_supported", "is_tf32_supported"]


def _device_index(device, optional=True):
    """int, "cuda", "cuda:N", torch.device or None -> an index (-1: current)."""
    if device is None:
        if not optional:
            raise ValueError("tcuda: expected a device, got None")
        return -1
    if isinstance(device, bool):
        raise TypeError("tcuda: invalid device %r" % (device,))
    if isinstance(device, int):
        return int_arg(device, "device")
    if isinstance(device, str):
        kind, _, idx = device.partition(":")
        if kind != "cuda":
            raise ValueError("tcuda: expected a CUDA device, got %r" % device)
        return int_arg(idx, "device") if idx else -1
    kind, idx = getattr(device, "type", None), getattr(device, "index", None)
    if kind is not None:  # torch.device
        if kind != "cuda":
            raise ValueError("tcuda: expected a CUDA device, got %r" % (device,))
        return -1 if idx is None else int_arg(idx, "device")
    raise TypeError("tcuda: invalid device %r" % (device,))


def _resolve(device):
    idx = _device_index(device)
    if idx == -1:
        idx = current_device()
    return idx


def is_available():
    return bool(lib.tcuda_is_available())


def unavailable_reason():
    """Why is_available() is False ("" when it is True)."""
    return lib.tcuda_unavailable_reason().decode()


def is_initialized():
    return bool(lib.tcuda_is_initialized())


def init():
    check(lib.tcuda_init())


def device_count():
    return lib.tcuda_device_count()


def current_device():
    d = c_int(-1)
    check(lib.tcuda_current_device(byref(d)))
    return d.value


def set_device(device):
    check(lib.tcuda_set_device(_device_index(device)))


class device:
    """with tcuda.device(i): ... (None or a negative index does nothing)."""

    def __init__(self, device):
        self.idx = _device_index(device)
        self._guards = []

    def __enter__(self):
        g = DeviceGuardT()
        check(lib.tcuda_device_guard_begin(byref(g), self.idx))
        self._guards.append(g)
        return self

    def __exit__(self, *exc):
        check(lib.tcuda_device_guard_end(byref(self._guards.pop())))
        return False


def _object_device(obj):
    """CUDA device index of a tensor-like object, or -1 when it is not on one."""
    if hasattr(obj, "__dlpack_device__"):
        kind, idx = obj.__dlpack_device__()
        return int(idx) if int(kind) in (2, 13) else -1
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        ptr = int(cai["data"][0])
        if not ptr:
            return -1
        d = c_int(-1)
        check(lib.tcuda_device_of(ptr, byref(d)))
        return d.value
    if hasattr(obj, "get_device"):
        return int(obj.get_device())
    return -1


class device_of(device):
    """with tcuda.device_of(tensor): the tensor's device is current inside
    (a host tensor changes nothing)."""

    def __init__(self, obj):
        super().__init__(_object_device(obj))


def get_device_properties(device=None):
    p = DevicePropertiesT()
    p.struct_size = ctypes.sizeof(p)
    check(lib.tcuda_get_device_properties(_device_index(device), byref(p)))
    return DeviceProperties(p)


class DeviceProperties:
    """torch's _CudaDeviceProperties fields."""

    def __init__(self, p):
        self.name = p.name.decode()
        self.major, self.minor = p.major, p.minor
        self.total_memory = p.total_memory
        self.multi_processor_count = p.multi_processor_count
        self.max_threads_per_multi_processor = p.max_threads_per_multi_processor
        self.L2_cache_size = p.l2_cache_size
        self.warp_size = p.warp_size
        self.is_integrated = p.is_integrated
        self.is_multi_gpu_board = p.is_multi_gpu_board
        self.uuid = p.uuid_string.decode()[4:]  # torch prints the bare UUID
        self.pci_bus_id, self.pci_device_id, self.pci_domain_id = p.pci_bus_id, p.pci_device_id, p.pci_domain_id

    def __repr__(self):
        return ("_CudaDeviceProperties(name='%s', major=%d, minor=%d, total_memory=%dMB, "
                "multi_processor_count=%d, uuid=%s, pci_bus_id=%d, pci_device_id=%d, pci_domain_id=%d, "
                "L2_cache_size=%dMB)" % (self.name, self.major, self.minor, self.total_memory // (1 << 20),
                                          self.multi_processor_count, self.uuid, self.pci_bus_id,
                                          self.pci_device_id, self.pci_domain_id, self.L2_cache_size // (1 << 20)))


def get_device_name(device=None):
    buf = ctypes.create_string_buffer(256)
    check(lib.tcuda_get_device_name(_device_index(device), buf, 256))
    return buf.value.decode()


def get_device_capability(device=None):
    major, minor = c_int(), c_int()
    check(lib.tcuda_get_device_capability(_device_index(device), byref(major), byref(minor)))
    return (major.value, minor.value)


def synchronize(device=None):
    check(lib.tcuda_synchronize(_device_index(device)))


def mem_get_info(device=None):
    free, total = c_size_t(), c_size_t()
    check(lib.tcuda_mem_get_info(_device_index(device), byref(free), byref(total)))
    return (free.value, total.value)


def can_device_access_peer(device, peer_device):
    can = c_int()
    check(lib.tcuda_can_device_access_peer(_device_index(device, False), _device_index(peer_device, False),
                                           byref(can)))
    return bool(can.value)


def get_arch_list():
    """Architectures libtcuda's kernels were built for; [] without CUDA, as torch's."""
    if not is_available():
        return []
    s = lib.tcuda_get_arch_list().decode()
    return s.split() if s else []


def get_gencode_flags():
    """nvcc -gencode flags of libtcuda's kernels; "" without CUDA, as torch's."""
    if not is_available():
        return ""
    return lib.tcuda_get_gencode_flags().decode()



def is_bf16_supported(including_emulation=True):
    """torch's: False without CUDA; True on compute capability 8.0 or newer;
    on older GPUs, whether emulation counts (torch then checks that a
    bfloat16 tensor can be made, which CUDA always allows)."""
    if not is_available():
        return False
    if get_device_capability(current_device())[0] >= 8:
        return True
    return bool(including_emulation)


def is_tf32_supported():
    """torch's: TF32 math exactly where bfloat16 runs natively (8.0 or newer)."""
    return is_bf16_supported(including_emulation=False)


def current_blas_handle():
    """The calling thread's cublasHandle_t for the current device, as an int,
    bound to the current stream with a workspace from the caching allocator
    (torch's). Call it again after changing the current stream."""
    h = c_void_p()
    check(lib.tcuda_current_blas_handle(byref(h)))
    return h.value or 0


def ipc_collect():
    """Free blocks that other processes were given (CUDA IPC) once they have
    closed them or died, and drop the reference file once nothing uses it.
    Initialises CUDA first, as torch's (so it raises without CUDA)."""
    check(lib.tcuda_init())
    check(lib.tcuda_ipc_collect())
