"""Streams and events: torch.cuda.Stream, ExternalStream, Event, stream()."""
import ctypes
from ctypes import byref, c_float, c_int, c_void_p

from ._device import _device_index
from ._lib import StreamGuardT, StreamT, check, int_arg, lib, pointer_arg

__all__ = ["Stream", "ExternalStream", "Event", "StreamContext", "stream", "current_stream", "default_stream",
           "set_stream", "get_stream_from_external"]

_TIMING, _BLOCKING, _INTERPROCESS = 1, 2, 4


class Stream:
    """torch.cuda.Stream(device=None, priority=0): a stream from the device's
    pool (32 per priority level, handed out round-robin, as torch)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        self = super().__new__(cls)
        st = kwargs.get("_stream")
        if st is None:
            st = StreamT()
            check(lib.tcuda_stream_from_pool(_device_index(device), int_arg(priority, "priority"), byref(st)))
        self._s = st
        return self

    def __init__(self, device=None, priority=0, **kwargs):
        pass

    @classmethod
    def _wrap(cls, st):
        return Stream.__new__(Stream, _stream=st)

    @staticmethod
    def priority_range():
        """(least, greatest) priority on the current device, as torch."""
        least, greatest = c_int(), c_int()
        check(lib.tcuda_stream_priority_range(byref(least), byref(greatest)))
        return (least.value, greatest.value)

    @property
    def device(self):
        return self._s.device

    device_index = device

    @property
    def cuda_stream(self):
        """The cudaStream_t as an int (0 for the default stream)."""
        return self._s.handle or 0

    @property
    def stream_id(self):
        return self._s.id

    @property
    def priority(self):
        p = c_int()
        check(lib.tcuda_stream_get_priority(self._s, byref(p)))
        return p.value

    def query(self):
        done = c_int()
        check(lib.tcuda_stream_query(self._s, byref(done)))
        return bool(done.value)

    def synchronize(self):
        check(lib.tcuda_stream_synchronize(self._s))

    def wait_event(self, event):
        check(lib.tcuda_stream_wait_event(self._s, event._e))

    def wait_stream(self, stream):
        check(lib.tcuda_stream_wait_stream(self._s, stream._s))

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self._s.id, self._s.device, self.cuda_stream) == \
            (other._s.id, other._s.device, other.cuda_stream)

    def __hash__(self):
        return hash((self._s.id, self._s.device))

    def __repr__(self):
        return "<tcuda.Stream device=cuda:%d cuda_stream=%#x>" % (self.device, self.cuda_stream)


class ExternalStream(Stream):
    """torch.cuda.ExternalStream(stream_ptr, device=None): a cudaStream_t made
    elsewhere (not owned: keep it alive while in use)."""

    def __new__(cls, stream_ptr, device=None, **kwargs):
        st = StreamT()
        check(lib.tcuda_stream_external(pointer_arg(stream_ptr, "stream_ptr"), _device_index(device), byref(st)))
        self = object.__new__(cls)
        self._s = st
        return self

    def __init__(self, stream_ptr, device=None, **kwargs):
        pass


def get_stream_from_external(data_ptr, device=None):
    """torch.cuda.get_stream_from_external: a cudaStream_t made elsewhere, as
    a Stream (an ExternalStream: keep the CUDA stream alive while in use)."""
    return ExternalStream(data_ptr, device)


def current_stream(device=None):
    st = StreamT()
    check(lib.tcuda_current_stream(_device_index(device), byref(st)))
    return Stream._wrap(st)


def default_stream(device=None):
    st = StreamT()
    check(lib.tcuda_default_stream(_device_index(device), byref(st)))
    return Stream._wrap(st)


def set_stream(stream):
    if stream is None:
        return
    check(lib.tcuda_set_stream(stream._s))


class StreamContext:
    """with tcuda.stream(s): s is the current stream (and s.device the
    current device) inside; both are restored after. None does nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._guards = []

    def __enter__(self):
        if self.stream is not None:
            g = StreamGuardT()
            check(lib.tcuda_stream_guard_begin(byref(g), self.stream._s))
            self._guards.append(g)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            check(lib.tcuda_stream_guard_end(byref(self._guards.pop())))
        return False


def stream(stream):
    return StreamContext(stream)


class Event:
    """torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False).
    The CUDA event is made on first record, on the stream's device."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, _handle=None):
        self._e = None
        if _handle is None:
            flags = (_TIMING if enable_timing else 0) | (_BLOCKING if blocking else 0) | \
                (_INTERPROCESS if interprocess else 0)
            e = c_void_p()
            check(lib.tcuda_event_create(flags, byref(e)))
            _handle = e.value
        self._e = c_void_p(_handle)

    def __del__(self):
        e = getattr(self, "_e", None)
        if e is not None and e.value:
            self._e = None
            lib.tcuda_event_destroy(e)

    @classmethod
    def from_ipc_handle(cls, device, handle):
        handle = bytes(handle)
        e = c_void_p()
        check(lib.tcuda_event_from_ipc_handle(_device_index(device), handle, len(handle), byref(e)))
        return cls(_handle=e.value)

    def record(self, stream=None):
        check(lib.tcuda_event_record(self._e, None if stream is None else byref(stream._s)))

    def wait(self, stream=None):
        check(lib.tcuda_event_wait(self._e, None if stream is None else byref(stream._s)))

    def query(self):
        done = c_int()
        check(lib.tcuda_event_query(self._e, byref(done)))
        return bool(done.value)

    def synchronize(self):
        check(lib.tcuda_event_synchronize(self._e))

    def elapsed_time(self, end_event):
        ms = c_float()
        check(lib.tcuda_event_elapsed_time(self._e, end_event._e, byref(ms)))
        return ms.value

    def ipc_handle(self):
        """The 64-byte CUDA IPC handle, as bytes."""
        buf = (ctypes.c_char * 64)()
        check(lib.tcuda_event_ipc_handle(self._e, buf))
        return buf.raw

    @property
    def cuda_event(self):
        return lib.tcuda_event_handle(self._e) or 0

    @property
    def device(self):
        """The device of the CUDA event, or None before the first record."""
        d = lib.tcuda_event_device(self._e)
        return None if d < 0 else d

    def __repr__(self):
        return "<tcuda.Event %#x>" % self.cuda_event if self.cuda_event else "<tcuda.Event uninitialized>"
