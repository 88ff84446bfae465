"""RNG: torch.cuda's seeding and state functions, Generator, and in-place
fills (uniform_, normal_, random_) that write torch's values for the same
generator state into any CUDA tensor (torch, CuPy, ...)."""
import ctypes
from ctypes import byref, c_ubyte, c_uint64, c_void_p

from . import _dlpack
from ._device import _device_index, device_count
from ._lib import check, int64_arg, lib, uint64_arg

__all__ = ["get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed", "Generator", "default_generator",
           "uniform_", "normal_", "random_"]

_U64 = (1 << 64) - 1
_STATE_SIZE = 16  # TCUDA_RNG_STATE_SIZE: uint64 seed, int64 offset
_TORCH_DEFAULT_SEED = 67280421310721  # torch.Generator's seed before manual_seed


def _seed_value(seed):
    seed = int(seed)
    if not -(1 << 63) <= seed <= _U64:
        raise ValueError("tcuda: seed %d does not fit in 64 bits" % seed)
    return seed & _U64  # negative seeds wrap, as torch's


def _state_bytes(state):
    """bytes of a state: bytes-like, a torch ByteTensor or a NumPy array."""
    if isinstance(state, (bytes, bytearray, memoryview)):
        return bytes(state)
    if hasattr(state, "tolist"):
        return bytes(state.tolist())
    return bytes(state)


def _dev(device):
    """torch's get_rng_state(device="cuda") convention: "cuda" is current."""
    return _device_index(device)


def get_rng_state(device="cuda"):
    """The default generator's state: 16 bytes (seed, offset), as torch's ByteTensor holds."""
    buf = (c_ubyte * _STATE_SIZE)()
    check(lib.tcuda_get_rng_state(_dev(device), buf))
    return bytes(buf)


def set_rng_state(new_state, device="cuda"):
    """Without CUDA it does nothing, as torch's (which queues it for an
    initialisation that never comes)."""
    b = _state_bytes(new_state)
    dev = _dev(device)
    if not lib.tcuda_is_available():
        return
    check(lib.tcuda_set_rng_state(dev, b, len(b)))


def get_rng_state_all():
    """One state per device: [] without CUDA, as torch's."""
    n = device_count()
    if n == 0:
        return []
    buf = ctypes.create_string_buffer(_STATE_SIZE * max(n, 1))
    check(lib.tcuda_get_rng_state_all(buf, _STATE_SIZE * n))
    return [buf.raw[_STATE_SIZE * i:_STATE_SIZE * (i + 1)] for i in range(n)]


def set_rng_state_all(new_states):
    """States for devices 0, 1, ...; an empty list, or no CUDA, does nothing, as torch's."""
    b = b"".join(_state_bytes(s) for s in new_states)
    if not b or not lib.tcuda_is_available():
        return
    check(lib.tcuda_set_rng_state_all(b, len(b)))


def manual_seed(seed):
    check(lib.tcuda_manual_seed(_seed_value(seed)))


def manual_seed_all(seed):
    check(lib.tcuda_manual_seed_all(_seed_value(seed)))


def seed():
    check(lib.tcuda_seed())


def seed_all():
    check(lib.tcuda_seed_all())


def initial_seed():
    s = c_uint64()
    check(lib.tcuda_initial_seed(-1, byref(s)))
    return s.value


class Generator:
    """torch.Generator(device="cuda"): its own Philox stream on a device."""

    def __init__(self, device="cuda", _handle=None, _owned=True):
        self._g = None
        self._owned = _owned
        if _handle is None:
            g = c_void_p()
            check(lib.tcuda_generator_create(_dev(device), _TORCH_DEFAULT_SEED, byref(g)))
            _handle = g.value
        self._g = c_void_p(_handle)

    def __del__(self):
        g = getattr(self, "_g", None)
        if g is not None and self._owned:
            self._g = None
            lib.tcuda_generator_destroy(g)

    @property
    def device(self):
        return lib.tcuda_generator_device(self._g)

    def manual_seed(self, seed):
        check(lib.tcuda_generator_manual_seed(self._g, _seed_value(seed)))
        return self

    def seed(self):
        s = c_uint64()
        check(lib.tcuda_generator_seed(self._g, byref(s)))
        return s.value

    def initial_seed(self):
        s = c_uint64()
        check(lib.tcuda_generator_initial_seed(self._g, byref(s)))
        return s.value

    def get_state(self):
        buf = (c_ubyte * _STATE_SIZE)()
        check(lib.tcuda_generator_get_state(self._g, buf))
        return bytes(buf)

    def set_state(self, new_state):
        b = _state_bytes(new_state)
        check(lib.tcuda_generator_set_state(self._g, b, len(b)))
        return self

    def get_offset(self):
        o = c_uint64()
        check(lib.tcuda_generator_get_offset(self._g, byref(o)))
        return o.value

    def set_offset(self, offset):
        check(lib.tcuda_generator_set_offset(self._g, uint64_arg(offset, "offset")))
        return self


def default_generator(device=None):
    """torch.cuda.default_generators[device]."""
    g = c_void_p()
    check(lib.tcuda_default_generator(_device_index(device), byref(g)))
    return Generator(_handle=g.value, _owned=False)


def _fill(fn, tensor, generator, *args):
    b = _dlpack.Borrowed(tensor)
    t = b.tensor
    if not _dlpack.is_contiguous(t):
        raise ValueError("tcuda: the tensor to fill must be contiguous")
    if t.device.device_type not in _dlpack._CUDA_TYPES:
        raise ValueError("tcuda: the tensor to fill must be on a CUDA device")
    data = (t.data or 0) + t.byte_offset
    check(fn(None if generator is None else generator._g, data or None, _dlpack.numel(t),
             _dlpack.tcuda_dtype(t), *args, None))
    return tensor


def uniform_(tensor, from_=0.0, to=1.0, generator=None):
    """tensor.uniform_(from_, to): torch's values for the generator's state."""
    return _fill(lib.tcuda_rand_uniform, tensor, generator, float(from_), float(to))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(lib.tcuda_rand_normal, tensor, generator, float(mean), float(std))


def random_(tensor, *args, generator=None):
    """As torch's overloads: random_(), random_(to) in [0, to),
    random_(from_, to) in [from_, to), random_(from_, None) in [from_, max]."""
    if len(args) > 2:
        raise TypeError("tcuda.random_: at most two bounds (from_, to), got %d" % len(args))
    if not args:
        return _fill(lib.tcuda_rand_random, tensor, generator)
    if len(args) == 1:
        return _fill(lib.tcuda_rand_randint, tensor, generator, 0, int64_arg(args[0], "to"))
    low, high = args
    if high is None:
        return _fill(lib.tcuda_rand_random_from, tensor, generator, int64_arg(low, "from_"))
    return _fill(lib.tcuda_rand_randint, tensor, generator, int64_arg(low, "from_"), int64_arg(high, "to"))
