"""torch.cuda's nvidia-smi readings (utilization, memory_usage, temperature,
power_draw, clock_rate, device_memory_used, list_gpu_processes) through
NVML, the NVIDIA driver's management library (libnvidia-ml.so.1), loaded
with ctypes at the first call. torch reads the same values through the
pynvml package; without NVML, these raise (list_gpu_processes returns a
message instead, as torch's does).

A CUDA device is found in NVML by its PCI bus id, so CUDA_VISIBLE_DEVICES
and CUDA_DEVICE_ORDER apply as they do for CUDA.
"""
import ctypes
import threading
from ctypes import POINTER, Structure, byref, c_char_p, c_int, c_uint, c_ulonglong, c_void_p

from ._device import _device_index, current_device
from ._lib import DevicePropertiesT, TcudaError, check, lib

__all__ = ["utilization", "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used",
           "list_gpu_processes"]

_LIBRARY = "libnvidia-ml.so.1"   # the soname the driver installs (tests point it elsewhere)

# nvmlReturn_t values this module acts on, and nvml.h's enum values it passes.
_SUCCESS, _NOT_SUPPORTED, _INSUFFICIENT_SIZE, _DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND = 0, 3, 7, 9, 12
_TEMPERATURE_GPU = 0   # nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU: the GPU die
_CLOCK_SM = 1          # nvmlClockType_t NVML_CLOCK_SM

# tcuda statuses (include/tcuda.h) for NVML's failures.
_TCUDA_NOT_AVAILABLE, _TCUDA_CUDA, _TCUDA_NOT_SUPPORTED = 3, 5, 11


class _Utilization(Structure):     # nvmlUtilization_t
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class _Memory(Structure):          # nvmlMemory_t
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class _ProcessV1(Structure):       # nvmlProcessInfo_v1_t
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong)]


class _ProcessV2(Structure):       # nvmlProcessInfo_v2_t
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]


_PROTOTYPES = {   # all return nvmlReturn_t
    "nvmlInit_v2": [],
    "nvmlErrorString": [c_int],
    "nvmlDeviceGetHandleByPciBusId_v2": [c_char_p, POINTER(c_void_p)],
    "nvmlDeviceGetIndex": [c_void_p, POINTER(c_uint)],
    "nvmlDeviceGetUtilizationRates": [c_void_p, POINTER(_Utilization)],
    "nvmlDeviceGetMemoryInfo": [c_void_p, POINTER(_Memory)],
    "nvmlDeviceGetTemperature": [c_void_p, c_int, POINTER(c_uint)],
    "nvmlDeviceGetPowerUsage": [c_void_p, POINTER(c_uint)],
    "nvmlDeviceGetClockInfo": [c_void_p, c_int, POINTER(c_uint)],
}
# Tried in order: the first one the library has lists the processes.
_PROCESS_CALLS = (("nvmlDeviceGetComputeRunningProcesses_v2", _ProcessV2),
                  ("nvmlDeviceGetComputeRunningProcesses", _ProcessV1))

_lock = threading.Lock()
_nvml = None   # the initialised library, once loaded


class _Unavailable(TcudaError):
    """NVML cannot be loaded or initialised."""


def _error(func, status, nvml):
    what = (nvml.nvmlErrorString(status) or b"").decode("utf-8", "replace")
    code = {_NOT_SUPPORTED: _TCUDA_NOT_SUPPORTED, _DRIVER_NOT_LOADED: _TCUDA_NOT_AVAILABLE,
            _LIBRARY_NOT_FOUND: _TCUDA_NOT_AVAILABLE}.get(status, _TCUDA_CUDA)
    cls = _Unavailable if code == _TCUDA_NOT_AVAILABLE else TcudaError
    return cls("%s: NVML error %d (%s)" % (func, status, what or "unknown"), code,
               lib.tcuda_status_name(code).decode())


def _library(func):
    """The loaded and initialised NVML, or _Unavailable saying why not."""
    global _nvml
    with _lock:
        if _nvml is not None:
            return _nvml
        try:
            nvml = ctypes.CDLL(_LIBRARY)
        except OSError as e:
            raise _Unavailable("%s: NVML is not available: cannot load %s (%s). NVML comes with the NVIDIA driver; "
                               "torch.cuda needs it for this too (through pynvml)" % (func, _LIBRARY, e),
                               _TCUDA_NOT_AVAILABLE, "TCUDA_ERROR_NOT_AVAILABLE") from None
        for name, args in _PROTOTYPES.items():
            fn = getattr(nvml, name, None)
            if fn is None:
                raise _Unavailable("%s: NVML is not available: %s has no %s (a driver older than R450?)"
                                   % (func, _LIBRARY, name), _TCUDA_NOT_AVAILABLE, "TCUDA_ERROR_NOT_AVAILABLE")
            fn.restype, fn.argtypes = c_int, args
        nvml.nvmlErrorString.restype, nvml.nvmlErrorString.argtypes = c_char_p, [c_int]
        st = nvml.nvmlInit_v2()
        if st != _SUCCESS:
            raise _error("%s: nvmlInit" % func, st, nvml)
        _nvml = nvml
        return nvml


def _pci_bus_id(device):
    """The PCI bus id ("0000:1b:00.0") of a CUDA device (None: current)."""
    dev = _device_index(device)
    if dev == -1:
        dev = current_device()
    p = DevicePropertiesT()
    p.struct_size = ctypes.sizeof(p)
    check(lib.tcuda_get_device_properties(dev, byref(p)))
    return p.pci_bus_string


def _handle(func, device):
    nvml = _library(func)
    h = c_void_p()
    st = nvml.nvmlDeviceGetHandleByPciBusId_v2(_pci_bus_id(device), byref(h))
    if st != _SUCCESS:
        raise _error("%s: nvmlDeviceGetHandleByPciBusId" % func, st, nvml)
    return nvml, h


def _call(nvml, func, name, *args):
    st = getattr(nvml, name)(*args)
    if st != _SUCCESS:
        raise _error("%s: %s" % (func, name), st, nvml)


def utilization(device=None):
    """Percent of the last sample period (1/6 s to 1 s) during which a kernel
    ran on the device, as nvidia-smi reports."""
    nvml, h = _handle("tcuda.utilization", device)
    u = _Utilization()
    _call(nvml, "tcuda.utilization", "nvmlDeviceGetUtilizationRates", h, byref(u))
    return u.gpu


def memory_usage(device=None):
    """Percent of the last sample period during which device memory was read
    or written, as nvidia-smi reports."""
    nvml, h = _handle("tcuda.memory_usage", device)
    u = _Utilization()
    _call(nvml, "tcuda.memory_usage", "nvmlDeviceGetUtilizationRates", h, byref(u))
    return u.memory


def device_memory_used(device=None):
    """Bytes of device memory in use by every process, as nvidia-smi reports."""
    nvml, h = _handle("tcuda.device_memory_used", device)
    m = _Memory()
    _call(nvml, "tcuda.device_memory_used", "nvmlDeviceGetMemoryInfo", h, byref(m))
    return m.used


def temperature(device=None):
    """The GPU die's temperature in degrees Celsius."""
    nvml, h = _handle("tcuda.temperature", device)
    t = c_uint()
    _call(nvml, "tcuda.temperature", "nvmlDeviceGetTemperature", h, _TEMPERATURE_GPU, byref(t))
    return t.value


def power_draw(device=None):
    """The board's power draw in milliwatts."""
    nvml, h = _handle("tcuda.power_draw", device)
    p = c_uint()
    _call(nvml, "tcuda.power_draw", "nvmlDeviceGetPowerUsage", h, byref(p))
    return p.value


def clock_rate(device=None):
    """The SM clock in MHz."""
    nvml, h = _handle("tcuda.clock_rate", device)
    c = c_uint()
    _call(nvml, "tcuda.clock_rate", "nvmlDeviceGetClockInfo", h, _CLOCK_SM, byref(c))
    return c.value


def _processes(nvml, h, func):
    for name, info in _PROCESS_CALLS:
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        fn.restype, fn.argtypes = c_int, [c_void_p, POINTER(c_uint), POINTER(info)]
        n = c_uint(0)
        st = fn(h, byref(n), None)
        while st == _INSUFFICIENT_SIZE:   # processes may start between the calls
            arr = (info * (n.value + 4))()
            n = c_uint(len(arr))
            st = fn(h, byref(n), arr)
            if st == _SUCCESS:
                return [(arr[i].pid, arr[i].usedGpuMemory) for i in range(n.value)]
        if st != _SUCCESS:
            raise _error("%s: %s" % (func, name), st, nvml)
        return []
    raise _Unavailable("%s: NVML is not available: %s lists no processes" % (func, _LIBRARY),
                       _TCUDA_NOT_AVAILABLE, "TCUDA_ERROR_NOT_AVAILABLE")


def list_gpu_processes(device=None):
    """The processes using the device and their memory, in torch's text form
    ("GPU:<NVML index>" then one line per process). Without NVML it returns
    a line saying so, as torch's does without pynvml."""
    func = "tcuda.list_gpu_processes"
    try:
        nvml = _library(func)
    except _Unavailable as e:
        return str(e)
    nvml, h = _handle(func, device)
    idx = c_uint()
    _call(nvml, func, "nvmlDeviceGetIndex", h, byref(idx))
    procs = _processes(nvml, h, func)
    lines = ["GPU:%d" % idx.value]
    if not procs:
        lines.append("no processes are running")
    for pid, used in procs:
        lines.append("process %10d uses %12.3f MB GPU memory" % (pid, used / (1024 * 1024)))
    return "\n".join(lines)
