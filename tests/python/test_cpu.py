"""The tcuda package without a GPU: import, availability, errors carrying
tcuda's messages, argument checks, library search and the DLPack export
machinery (on host memory). Run by tests/unit/python_pkg.sh; TCUDA_LIBRARY
names the libtcuda under test."""
import ctypes
import os
import subprocess
import sys

import pytest

import tcuda
from tcuda import _dlpack

NO_GPU = not tcuda.is_available()
gpu_absent = pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU behaviour")
PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(tcuda.__file__)))


def test_loaded_the_library_under_test():
    want = os.environ.get("TCUDA_LIBRARY")
    if want:
        assert os.path.realpath(tcuda.library_path()) == os.path.realpath(want)
    assert tcuda.library_version().count(".") == 2


@gpu_absent
def test_availability_without_gpu():
    assert tcuda.is_available() is False
    assert tcuda.device_count() == 0
    assert tcuda.unavailable_reason() != ""
    assert tcuda.is_initialized() is False


def _raises(call, name, *fragments):
    with pytest.raises(tcuda.TcudaError) as ei:
        call()
    e = ei.value
    assert e.name == name, (e.name, str(e))
    assert e.status == tcuda._lib.lib.tcuda_last_status() and e.status > 0
    for f in fragments:
        assert f in str(e), (f, str(e))
    return e


@gpu_absent
def test_calls_that_need_cuda_raise_not_available():
    na = "TCUDA_ERROR_NOT_AVAILABLE"
    _raises(tcuda.init, na, "tcuda_init", "CUDA is not available")
    _raises(tcuda.current_device, na, "tcuda_current_device")
    _raises(lambda: tcuda.set_device(1), na, "tcuda_set_device")
    _raises(lambda: tcuda.get_device_name(0), na, "tcuda_get_device_name")
    _raises(lambda: tcuda.get_device_capability(), na)
    _raises(lambda: tcuda.get_device_properties(0), na)
    _raises(tcuda.synchronize, na, "tcuda_synchronize")
    _raises(tcuda.mem_get_info, na)
    _raises(lambda: tcuda.Stream(), na, "tcuda_stream_from_pool")
    _raises(lambda: tcuda.ExternalStream(0x1234), na, "tcuda_stream_external")
    _raises(tcuda.current_stream, na, "tcuda_current_stream")
    _raises(tcuda.default_stream, na)
    _raises(tcuda.memory_summary, na, "tcuda_memory_summary")
    _raises(tcuda.reset_peak_memory_stats, na, "tcuda_reset_peak_memory_stats")
    _raises(lambda: tcuda.caching_allocator_alloc(1024), na)
    _raises(lambda: tcuda.get_rng_state(), na, "tcuda_get_rng_state")
    _raises(lambda: tcuda.Generator(), na, "tcuda_generator_create")
    _raises(lambda: tcuda.Event.from_ipc_handle(0, b"x" * 64), na, "tcuda_event_from_ipc_handle")
    _raises(lambda: tcuda.host_alloc(1), na, "tcuda_host_alloc")
    _raises(lambda: tcuda.CUDAGraph().capture_begin(), na, "tcuda_graph_capture_begin")
    with pytest.raises(tcuda.TcudaError):
        with tcuda.device(0):
            pass


@gpu_absent
def test_things_that_work_without_gpu():
    tcuda.manual_seed(1)        # ignored without CUDA, as torch
    tcuda.manual_seed_all(-1)   # negative seeds wrap
    tcuda.seed()
    tcuda.seed_all()
    tcuda.empty_cache()
    assert tcuda.memory_snapshot() == []
    assert tcuda.get_arch_list() == [a for a in tcuda.get_arch_list() if a.startswith(("sm_", "compute_"))]
    assert "arch=" in tcuda.get_gencode_flags() or tcuda.get_gencode_flags() == ""
    with tcuda.device(None):    # None and -1: no-ops
        pass
    with tcuda.device(-1):
        pass
    with tcuda.stream(None):
        pass
    tcuda.set_stream(None)
    assert tcuda.get_allocator_settings().startswith("backend:native")


def test_errors_are_runtime_errors_with_status():
    e = tcuda.TcudaError("m", 2, "TCUDA_ERROR_INVALID_DEVICE")
    assert isinstance(e, RuntimeError) and e.status == 2 and str(e) == "m"
    assert issubclass(tcuda.OutOfMemoryError, tcuda.TcudaError)
    err = tcuda._lib.error_from(6)
    assert isinstance(err, tcuda.OutOfMemoryError) and err.name == "TCUDA_ERROR_OUT_OF_MEMORY"


def test_allocator_settings_errors_name_the_key():
    e = _raises(lambda: tcuda.set_allocator_settings("max_split_size_mb:banana"), "TCUDA_ERROR_CONFIG",
                "max_split_size_mb")
    assert "banana" in str(e)
    _raises(lambda: tcuda.set_allocator_settings("no_such_key:1"), "TCUDA_ERROR_CONFIG", "no_such_key")
    _raises(lambda: tcuda.set_per_process_memory_fraction(float("nan"), 0), "TCUDA_ERROR_INVALID_ARGUMENT",
            "Invalid fraction value: nan")


def test_bad_arguments_raise_torchs_exception_types():
    # torch.cuda.set_per_process_memory_fraction checks in Python: the type
    # first (an int is refused), then the range, with these messages
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`"):
        tcuda.set_per_process_memory_fraction(1)
    for bad in (-0.1, 2.0):
        with pytest.raises(ValueError, match="Invalid fraction value: %s. Allowed range: 0~1" % bad):
            tcuda.set_per_process_memory_fraction(bad)
    # the strings torch's test_allocator_settings expects ValueError for
    for bad in ("foo:1,bar:2", "garbage_collection_threshold:1.2", "max_split_size_mb:2",
                "release_lock_on_cudamalloc:none", "pinned_use_cuda_host_register:none",
                "pinned_num_register_threads:none", "pinned_num_register_threads:1024"):
        with pytest.raises(ValueError) as ei:
            tcuda.set_allocator_settings(bad)
        assert isinstance(ei.value, tcuda.TcudaError) and ei.value.name == "TCUDA_ERROR_CONFIG"


def test_memory_snapshot_pool_ids_are_tuples():
    segs = tcuda.memory._segments_from_json('[{"segment_pool_id": [1, 2], "blocks": []}, {"device": 0}]')
    assert segs[0]["segment_pool_id"] == (1, 2) and type(segs[0]["segment_pool_id"]) is tuple
    assert segs[1] == {"device": 0}


def test_device_arguments():
    idx = tcuda._device._device_index
    assert idx(None) == -1 and idx(3) == 3 and idx("cuda") == -1 and idx("cuda:2") == 2

    class FakeTorchDevice:
        type, index = "cuda", 1
    assert idx(FakeTorchDevice()) == 1
    for bad in ("cpu", "cuda:x"):
        with pytest.raises(ValueError):
            idx(bad)
    for bad in (True, 1.5, object()):
        with pytest.raises(TypeError):
            idx(bad)
    with pytest.raises(ValueError):
        idx(None, optional=False)


def test_event_without_gpu():
    e = tcuda.Event(enable_timing=True)
    assert e.query() is True and e.device is None and e.cuda_event == 0
    e.synchronize()             # never recorded: no-op
    _raises(lambda: e.elapsed_time(tcuda.Event()), "TCUDA_ERROR_INVALID_ARGUMENT", "TCUDA_EVENT_TIMING")
    _raises(lambda: e.elapsed_time(tcuda.Event(enable_timing=True)), "TCUDA_ERROR_INVALID_STATE")
    _raises(lambda: tcuda.Event(enable_timing=True, interprocess=True), "TCUDA_ERROR_INVALID_ARGUMENT",
            "cannot be combined")
    _raises(lambda: tcuda.Event.from_ipc_handle(0, b"x" * 10), "TCUDA_ERROR_INVALID_ARGUMENT",
            "size 64, but got 10")
    del e


def test_nvtx():
    assert tcuda.nvtx.range_push("a") == 0
    assert tcuda.nvtx.range_push("b") == 1
    assert tcuda.nvtx.range_pop() == 1
    assert tcuda.nvtx.range_pop() == 0
    _raises(tcuda.nvtx.range_pop, "TCUDA_ERROR_INVALID_STATE", "no range is open")
    with tcuda.nvtx.range("step {}", 3):
        assert tcuda.nvtx.range_push("inner") == 1
        tcuda.nvtx.range_pop()
    tcuda.nvtx.mark("hello")
    rid = tcuda.nvtx.range_start("r")
    tcuda.nvtx.range_end(rid)
    _raises(lambda: tcuda.nvtx.range_end(rid), "TCUDA_ERROR_INVALID_ARGUMENT", "is not an open range")


_HOST_KEYS = sorted("%s.%s" % (k, m) for k in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
                    for m in ("current", "peak", "allocated", "freed")) + \
    sorted("%s.%s" % (k, m) for k in ("host_alloc_time", "host_free_time")
           for m in ("total", "max", "min", "count", "avg")) + ["num_host_alloc", "num_host_free"]


def test_host_memory_stats_keys_are_torchs():
    # What host_memory_stats() returns once tcuda is initialised (before,
    # it is empty, as torch's).
    nested = tcuda.memory._host_stats_nested()
    st = tcuda.memory._flatten(nested)
    assert list(st) == sorted(_HOST_KEYS)   # torch 2.10+'s names, sorted as torch's OrderedDict
    assert set(nested) == {"allocations", "allocated_bytes", "active_requests", "active_bytes",
                           "host_alloc_time", "host_free_time", "num_host_alloc", "num_host_free"}
    assert nested["allocations"]["current"] == st["allocations.current"]
    if tcuda.is_initialized():
        assert tcuda.host_memory_stats() == st and tcuda.host_memory_stats_as_nested_dict() == nested
    assert tcuda.memory.host_memory_stats is tcuda.host_memory_stats
    assert tcuda.empty_host_cache is tcuda.host_empty_cache


@gpu_absent
def test_host_memory_without_gpu():
    assert tcuda.host_memory_stats() == {} and tcuda.host_memory_stats_as_nested_dict() == {}
    assert all(v == 0 for v in tcuda.memory._flatten(tcuda.memory._host_stats_nested()).values())
    tcuda.reset_peak_host_memory_stats()
    tcuda.reset_accumulated_host_memory_stats()
    tcuda.host_empty_cache()
    tcuda.host_free(0)                   # like free(NULL)
    _raises(lambda: tcuda.host_alloc(4096), "TCUDA_ERROR_NOT_AVAILABLE", "tcuda_host_alloc", "CUDA is not available")
    assert tcuda.host_alloc(0) == 0      # torch: no block for 0 bytes
    assert all(v == 0 for v in tcuda.memory._flatten(tcuda.memory._host_stats_nested()).values())


def test_host_memory_bad_pointers():
    _raises(lambda: tcuda.host_free(0x12345), "TCUDA_ERROR_INVALID_POINTER", "tcuda_host_free",
            "is not a tcuda host allocation")


def test_graph_objects_and_tokens_without_capture():
    g = tcuda.CUDAGraph()
    _raises(g.replay, "TCUDA_ERROR_INVALID_STATE", "tcuda_graph_replay",
            "Called CUDAGraph::replay without a preceding successful capture.")
    _raises(g.pool, "TCUDA_ERROR_INVALID_STATE", "CUDAGraph::pool without a preceding successful capture")
    _raises(lambda: g.debug_dump("/nonexistent/g.dot"), "TCUDA_ERROR_INVALID_STATE", "CUDAGraph::debug_dump")
    _raises(g.capture_end, "TCUDA_ERROR_INVALID_STATE", "capture_end() called before capture_begin().")
    _raises(g.num_nodes, "TCUDA_ERROR_INVALID_STATE")
    assert g.raw_cuda_graph_exec() == 0
    g.reset()                            # no-op on an empty graph, as torch
    a, b = tcuda.graph_pool_handle(), tcuda.graph_pool_handle()
    assert a[0] == 0 and b[0] == 0 and b[1] > a[1] > 0   # torch's (0, uid) user pools
    del g


def test_graph_argument_errors_carry_tcudas_message():
    g = tcuda.CUDAGraph()
    msg = "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got bogus"
    _raises(lambda: g.capture_begin(capture_error_mode="bogus"), "TCUDA_ERROR_INVALID_ARGUMENT", msg)
    _raises(lambda: tcuda.graph(g, capture_error_mode="bogus"), "TCUDA_ERROR_INVALID_ARGUMENT", msg)
    _raises(lambda: g.capture_begin(pool=(1, 1)), "TCUDA_ERROR_INVALID_ARGUMENT", "not a pool token")
    _raises(lambda: g.capture_begin(pool=(0, 1 << 40)), "TCUDA_ERROR_INVALID_ARGUMENT",
            "was not made by tcuda_graph_pool_handle")
    with pytest.raises(TypeError, match="pair of ints"):
        g.capture_begin(pool="x")
    with pytest.raises(NotImplementedError):
        tcuda.CUDAGraph(keep_graph=True)
    with pytest.raises(NotImplementedError, match="make_graphed_callables"):
        tcuda.make_graphed_callables(lambda x: x, (1,))


@gpu_absent
def test_graph_capture_without_gpu():
    assert tcuda.is_current_stream_capturing() is False   # torch: False, no CUDA init
    g = tcuda.CUDAGraph()
    _raises(g.capture_begin, "TCUDA_ERROR_NOT_AVAILABLE", "tcuda_graph_capture_begin")
    with pytest.raises(tcuda.TcudaError) as ei:
        with tcuda.graph(g):
            pytest.fail("the body must not run when the capture cannot start")
    assert ei.value.name == "TCUDA_ERROR_NOT_AVAILABLE" and "tcuda_graph_capture_scope_begin" in str(ei.value)
    _raises(g.replay, "TCUDA_ERROR_INVALID_STATE")       # the failed begin left nothing behind
    g.enable_debug_mode()                                # process-wide flag; no CUDA needed


def test_graph_exit_keeps_the_users_exception(monkeypatch):
    # An exception inside `with graph(...)` must not be replaced by the
    # capture's own failure; a clean exit must raise it.
    from tcuda import graphs
    g = tcuda.CUDAGraph()
    cm = tcuda.graph(g)
    monkeypatch.setattr(graphs.lib, "tcuda_graph_capture_scope_end", lambda sc: 3)
    cm._scope = tcuda._lib.GraphScopeT()
    assert cm.__exit__(ValueError, ValueError("mine"), None) is False
    cm._scope = tcuda._lib.GraphScopeT()
    with pytest.raises(tcuda.TcudaError):
        cm.__exit__(None, None, None)


def test_rng_state_arguments():
    b = tcuda.random._state_bytes
    assert b(b"x" * 16) == b"x" * 16 and b(bytearray(2)) == b"\0\0"

    class ByteTensorLike:
        def tolist(self):
            return [1, 2, 3]
    assert b(ByteTensorLike()) == b"\x01\x02\x03"
    with pytest.raises(ValueError):
        tcuda.manual_seed(1 << 64)
    with pytest.raises(TypeError):
        tcuda.random_(None, 1, 2, 3)


def test_comm_rejects_non_tensors_and_bad_arguments():
    with pytest.raises(TypeError, match="__dlpack__ or __cuda_array_interface__"):
        tcuda.comm.broadcast(object(), [0])
    with pytest.raises(RuntimeError, match="exactly one of"):
        tcuda.comm.broadcast(object())
    with pytest.raises(RuntimeError, match="exactly one of"):
        tcuda.comm.broadcast(object(), [0], out=[])
    with pytest.raises(ValueError, match="same number"):
        tcuda.comm.reduce_add_coalesced([[1, 2], [1]])
    with pytest.raises(TypeError):
        tcuda.uniform_(object())


# ---- DLPack export and import on host memory ----

_freed = []


@_dlpack._Deleter
def _host_deleter(m):
    _freed.append(ctypes.addressof(m.contents))


def _host_tensor(values, code=_dlpack.kDLFloat, bits=32):
    """A C-style DLManagedTensor over a ctypes float array, as the C API returns."""
    data = (ctypes.c_float * len(values))(*values)
    shape = (ctypes.c_int64 * 1)(len(values))
    m = _dlpack.DLManagedTensor()
    m.dl_tensor.data = ctypes.addressof(data)
    m.dl_tensor.device = _dlpack.DLDevice(_dlpack.kDLCPU, 0)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = _dlpack.DLDataType(code, bits, 1)
    m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    m.deleter = _host_deleter
    keep = (data, shape, m)
    return _dlpack.Tensor(ctypes.addressof(m), keep=[keep]), m


def test_tensor_metadata_and_repr():
    t, m = _host_tensor([1.0, 2.0, 3.0])
    assert t.shape == (3,) and t.strides == (1,) and t.dtype == "float32" and t.device == -1
    assert t.__dlpack_device__() == (_dlpack.kDLCPU, 0)
    assert "float32" in repr(t) and "cpu" in repr(t)
    assert not hasattr(t, "__cuda_array_interface__")  # host memory has none
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))


def test_capsules_keep_the_tensor_and_release_it_once():
    _freed.clear()
    t, m = _host_tensor([4.0, 5.0])
    addr = ctypes.addressof(m)
    c1 = t.__dlpack__()
    c2 = t.__dlpack__(max_version=(1, 0), stream=None)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p1 = get(c1, b"dltensor")
    view = _dlpack.DLManagedTensor.from_address(p1)
    assert ctypes.cast(view.dl_tensor.data, ctypes.POINTER(ctypes.c_float))[1] == 5.0
    del t
    assert _freed == []            # the capsules still hold it
    del c1
    assert _freed == []
    # A consumer takes c2: renames it and calls the deleter when done.
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p2 = get(c2, b"dltensor")
    ctypes.pythonapi.PyCapsule_SetName(c2, b"used_dltensor")
    del c2                          # renamed: the destructor leaves it alone
    assert _freed == []
    managed = _dlpack.DLManagedTensor.from_address(p2)
    managed.deleter(ctypes.pointer(managed))
    assert _freed == [addr]         # the C-owned tensor went back exactly once


def test_borrow_through_dlpack_protocol():
    t, _m = _host_tensor([7.0, 8.0, 9.0])

    class Foreign:                  # only the protocol, like numpy/cupy/torch
        def __dlpack__(self, stream=None):
            assert stream is None   # host tensors get no stream
            return t.__dlpack__()

        def __dlpack_device__(self):
            return t.__dlpack_device__()
    b = _dlpack.Borrowed(Foreign())
    dt = b.tensor
    assert dt.ndim == 1 and dt.shape[0] == 3 and _dlpack.tcuda_dtype(dt) == 0
    assert _dlpack.is_contiguous(dt) and _dlpack.numel(dt) == 3


def test_dtype_table_and_unknown_dtypes():
    t, _m = _host_tensor([1.0], code=_dlpack.kDLFloat, bits=24)
    with pytest.raises(TypeError, match="unsupported DLPack dtype"):
        t.dtype
    bf, _m2 = _host_tensor([1.0], code=_dlpack.kDLBfloat, bits=16)
    assert bf.dtype == "bfloat16"


@gpu_absent
def test_cuda_array_interface_input_needs_cuda():
    class CAI:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    _raises(lambda: _dlpack.Borrowed(CAI()), "TCUDA_ERROR_NOT_AVAILABLE", "tcuda_device_of")

    class BigEndian:
        __cuda_array_interface__ = {"shape": (2,), "typestr": ">f4", "data": (0x1000, False), "version": 3}
    with pytest.raises(TypeError, match="typestr"):
        _dlpack.Borrowed(BigEndian())


def test_interop_entry_points_exported():
    lib = tcuda._lib.lib
    for name in ("tcuda_torch_malloc", "tcuda_torch_free", "tcuda_cupy_malloc", "tcuda_cupy_free"):
        assert ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    assert lib.tcuda_torch_malloc(-1, 0, None) is None
    assert b"size -1 is negative" in lib.tcuda_last_error()


def _run(code, **env):
    e = dict(os.environ, PYTHONPATH=PY_DIR, PYTHONDONTWRITEBYTECODE="1")
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True)


def test_missing_library_is_a_clear_import_error():
    r = _run("import tcuda", TCUDA_LIBRARY="/nonexistent/libtcuda.so")
    assert r.returncode != 0
    assert "cannot load libtcuda.so" in r.stderr
    assert "/nonexistent/libtcuda.so" in r.stderr and "TCUDA_LIBRARY" in r.stderr


def test_library_search_without_env():
    # With no TCUDA_LIBRARY the package searches bundled, repository build,
    # then the system; whichever it loads, the path is absolute.
    e = dict(os.environ)
    e.pop("TCUDA_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", "import tcuda; print(tcuda.library_path())"],
                       env=dict(e, PYTHONPATH=PY_DIR, PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True)
    if r.returncode == 0:
        assert os.path.isabs(r.stdout.strip())
    else:
        assert "Tried:" in r.stderr and "repository build" in r.stderr


def test_torch_and_cupy_helpers_need_their_framework():
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    if not has_torch:
        with pytest.raises(ImportError):
            tcuda.interop.torch_allocator()


# ---- arguments C cannot hold: ctypes would wrap or cut them silently ----

_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1


def test_sizes_beyond_size_t_raise_overflow_error():
    # ctypes wraps: host_alloc(2**64) asked for 0 bytes and "succeeded",
    # caching_allocator_alloc(2**64 + 16) asked for 16.
    for size in (_SIZE_MAX + 1, 2**64 + 16, 2**100):
        with pytest.raises(OverflowError, match="size_t"):
            tcuda.host_alloc(size)
        with pytest.raises(OverflowError, match="size_t"):
            tcuda.caching_allocator_alloc(size)
    with pytest.raises(OverflowError):
        tcuda.comm.broadcast_coalesced([object()], [0], buffer_size=2**64)


def test_negative_sizes_raise_value_error():
    # host_alloc(-1) asked for SIZE_MAX bytes.
    for size in (-1, -(2**64)):
        with pytest.raises(ValueError, match="negative"):
            tcuda.host_alloc(size)
        with pytest.raises(ValueError, match="negative"):
            tcuda.caching_allocator_alloc(size)
    with pytest.raises(ValueError, match="negative"):
        tcuda.comm.reduce_add_coalesced([[object()]], buffer_size=-1)


def test_device_indexes_beyond_int_raise():
    # c_int wraps 2**32 to device 0.
    for dev in (2**31, 2**32, -(2**31) - 1):
        with pytest.raises(OverflowError, match="device"):
            tcuda.set_device(dev)
        with pytest.raises(OverflowError, match="device"):
            tcuda.device(dev)
        with pytest.raises(OverflowError, match="device"):
            tcuda.get_device_name(dev)
    with pytest.raises(OverflowError, match="priority"):
        tcuda.Stream(priority=2**32)


def test_pointers_beyond_64_bits_raise():
    # c_void_p wraps 2**64 to NULL: host_free(2**64) "freed" nothing.
    for bad, exc in ((2**64, OverflowError), (-1, ValueError)):
        with pytest.raises(exc):
            tcuda.host_free(bad)
        with pytest.raises(exc):
            tcuda.caching_allocator_delete(bad)
        with pytest.raises(exc):
            tcuda.ExternalStream(bad)


def test_64_bit_integers_out_of_range_raise():
    with pytest.raises(ValueError, match="negative"):
        tcuda.nvtx.range_end(-1)
    with pytest.raises(OverflowError):
        tcuda.nvtx.range_end(2**64)
    g = object.__new__(tcuda.Generator)   # a NULL handle: the check must come first
    g._g, g._owned = ctypes.c_void_p(), False
    with pytest.raises(ValueError, match="negative"):
        g.set_offset(-4)
    with pytest.raises(OverflowError):
        g.set_offset(2**64)
    with pytest.raises(OverflowError):
        tcuda.random_(object(), 2**70)
    with pytest.raises(OverflowError):
        tcuda.random_(object(), -(2**63) - 1, 0)
    with pytest.raises(OverflowError):
        tcuda.comm.scatter(object(), [0], chunk_sizes=[2**64])
    with pytest.raises(OverflowError):
        tcuda.comm.gather([object()], dim=2**63)
    with pytest.raises(OverflowError):      # was masked to (0, 1)
        tcuda.CUDAGraph().capture_begin(pool=(2**64, 1))
    with pytest.raises(ValueError, match="negative"):
        tcuda.CUDAGraph().capture_begin(pool=(0, -1))


def test_strings_with_nul_raise_value_error():
    # c_char_p stops at the NUL: "expandable_segments:True\0junk" applied
    # only the first part, and NVTX names were cut.
    cases = [
        lambda: tcuda.set_allocator_settings("max_split_size_mb:100\0garbage"),
        lambda: tcuda.nvtx.range_push("a\0b"),
        lambda: tcuda.nvtx.mark("a\0b"),
        lambda: tcuda.nvtx.range_start("a\0b"),
        lambda: tcuda.CUDAGraph().capture_begin(capture_error_mode="global\0x"),
        lambda: tcuda.graph(tcuda.CUDAGraph(), capture_error_mode="relaxed\0"),
        lambda: tcuda.CUDAGraph().debug_dump("/tmp/x\0.dot"),
    ]
    for call in cases:
        with pytest.raises(ValueError, match="NUL"):
            call()
    with tcuda.nvtx.range("{}", "ok"):   # a formatted name without NUL still works
        pass
    assert tcuda.get_allocator_settings().startswith("backend:native")


# ---- every public name without a GPU, as torch.cuda behaves (docs/python.md) ----

class _NA:
    """The call raises TcudaError TCUDA_ERROR_NOT_AVAILABLE ("CUDA is not available")."""


class _Is:
    def __init__(self, pred, what):
        self.pred, self.what = pred, what


# NVML absent: TCUDA_ERROR_NOT_AVAILABLE saying so; present (a driver
# without a GPU): CUDA is not available for the device lookup.
_NVML = _Is(lambda e: isinstance(e, tcuda.TcudaError) and e.name == "TCUDA_ERROR_NOT_AVAILABLE", "raises")


class _FakeStream:   # a Stream cannot be made without CUDA; its C value can
    _s = tcuda._lib.StreamT()


def _enter(cm):
    with cm:
        return "entered"


def _no_gpu_rows(tmp_path):
    host, _m = _host_tensor([1.0])
    return {
        # devices
        "is_available": (tcuda.is_available, False),
        "is_initialized": (tcuda.is_initialized, False),
        "init": (tcuda.init, _NA),
        "device_count": (tcuda.device_count, 0),
        "current_device": (tcuda.current_device, _NA),
        "set_device": (lambda: (tcuda.set_device(-1), tcuda.set_device(0)), _NA),   # -1: no-op, as torch
        "device": (lambda: (_enter(tcuda.device(None)), _enter(tcuda.device(0))), _NA),
        "device_of": (lambda: _enter(tcuda.device_of(host)), "entered"),          # host tensor: no-op
        "get_device_name": (tcuda.get_device_name, _NA),
        "get_device_capability": (tcuda.get_device_capability, _NA),
        "get_device_properties": (tcuda.get_device_properties, _NA),
        "synchronize": (tcuda.synchronize, _NA),
        "mem_get_info": (tcuda.mem_get_info, _NA),
        "can_device_access_peer": (lambda: tcuda.can_device_access_peer(0, 1), _NA),
        "get_arch_list": (tcuda.get_arch_list, []),
        "is_bf16_supported": (tcuda.is_bf16_supported, False),
        "is_tf32_supported": (tcuda.is_tf32_supported, False),
        "default_generators": (lambda: tcuda.default_generators, ()),
        "get_stream_from_external": (lambda: tcuda.get_stream_from_external(0x1234), _NA),
        "get_allocator_backend": (tcuda.get_allocator_backend, "native"),
        "list_gpu_processes": (tcuda.list_gpu_processes, _Is(lambda v: "NVML" in v or v.startswith("GPU:"),
                                                             "NVML's absence, or the list")),
        "utilization": (tcuda.utilization, _NVML),
        "memory_usage": (tcuda.memory_usage, _NVML),
        "temperature": (tcuda.temperature, _NVML),
        "power_draw": (tcuda.power_draw, _NVML),
        "clock_rate": (tcuda.clock_rate, _NVML),
        "device_memory_used": (tcuda.device_memory_used, _NVML),
        "current_blas_handle": (tcuda.current_blas_handle, _NA),
        "ipc_collect": (tcuda.ipc_collect, _NA),
        "get_gencode_flags": (tcuda.get_gencode_flags, ""),
        "unavailable_reason": (tcuda.unavailable_reason, _Is(lambda v: isinstance(v, str) and v, "a reason")),
        # streams and events
        "Stream": (tcuda.Stream, _NA),
        "ExternalStream": (lambda: tcuda.ExternalStream(0x1234), _NA),
        "current_stream": (tcuda.current_stream, _NA),
        "default_stream": (tcuda.default_stream, _NA),
        "set_stream": (lambda: tcuda.set_stream(None), None),
        "stream": (lambda: _enter(tcuda.stream(None)), "entered"),
        "StreamContext": (lambda: _enter(tcuda.StreamContext(None)), "entered"),
        "Event": (lambda: tcuda.Event().query(), True),        # made lazily; record() raises
        # caching allocator
        "caching_allocator_alloc": (lambda: tcuda.caching_allocator_alloc(1), _NA),
        "caching_allocator_delete": (lambda: tcuda.caching_allocator_delete(0), None),
        "empty_cache": (tcuda.empty_cache, None),
        "memory_stats": (tcuda.memory_stats, _Is(lambda v: v == {} and type(v).__name__ == "OrderedDict",
                                                 "an empty OrderedDict")),
        "memory_stats_as_nested_dict": (tcuda.memory_stats_as_nested_dict, {}),
        "memory_allocated": (tcuda.memory_allocated, 0),
        "max_memory_allocated": (tcuda.max_memory_allocated, 0),
        "memory_reserved": (tcuda.memory_reserved, 0),
        "max_memory_reserved": (tcuda.max_memory_reserved, 0),
        "memory_cached": (tcuda.memory_cached, 0),
        "max_memory_cached": (tcuda.max_memory_cached, 0),
        "memory_summary": (tcuda.memory_summary, _NA),
        "memory_snapshot": (tcuda.memory_snapshot, []),
        "reset_peak_memory_stats": (tcuda.reset_peak_memory_stats, _NA),
        "reset_accumulated_memory_stats": (tcuda.reset_accumulated_memory_stats, _NA),
        "reset_max_memory_allocated": (tcuda.reset_max_memory_allocated, _NA),
        "reset_max_memory_cached": (tcuda.reset_max_memory_cached, _NA),
        "set_per_process_memory_fraction": (lambda: tcuda.set_per_process_memory_fraction(0.5), _NA),
        "get_per_process_memory_fraction": (tcuda.get_per_process_memory_fraction, _NA),
        "set_allocator_settings": (lambda: tcuda.set_allocator_settings("max_split_size_mb:20"), None),
        "get_allocator_settings": (tcuda.get_allocator_settings,
                                   _Is(lambda v: v.startswith("backend:native"), "the settings")),
        "record_stream": (lambda: tcuda.memory.record_stream(0x1000, _FakeStream()), _NA),
        # pinned host memory
        "host_alloc": (lambda: tcuda.host_alloc(1), _NA),
        "host_free": (lambda: tcuda.host_free(0), None),
        "host_record_stream": (lambda: tcuda.host_record_stream(0x1000, _FakeStream()),
                               _Is(lambda e: isinstance(e, tcuda.TcudaError), "TCUDA_ERROR_INVALID_POINTER")),
        "host_empty_cache": (tcuda.host_empty_cache, None),
        "empty_host_cache": (tcuda.empty_host_cache, None),
        "host_memory_stats": (tcuda.host_memory_stats, {}),
        "host_memory_stats_as_nested_dict": (tcuda.host_memory_stats_as_nested_dict, {}),
        "reset_peak_host_memory_stats": (tcuda.reset_peak_host_memory_stats, None),
        "reset_accumulated_host_memory_stats": (tcuda.reset_accumulated_host_memory_stats, None),
        # RNG
        "manual_seed": (lambda: tcuda.manual_seed(1), None),
        "manual_seed_all": (lambda: tcuda.manual_seed_all(1), None),
        "seed": (tcuda.seed, None),
        "seed_all": (tcuda.seed_all, None),
        "initial_seed": (tcuda.initial_seed, _NA),
        "get_rng_state": (tcuda.get_rng_state, _NA),
        "get_rng_state_all": (tcuda.get_rng_state_all, []),
        "set_rng_state": (lambda: tcuda.set_rng_state(bytes(16)), None),
        "set_rng_state_all": (lambda: tcuda.set_rng_state_all([bytes(16)]), None),
        "Generator": (tcuda.Generator, _NA),
        "default_generator": (tcuda.default_generator, _NA),
        "uniform_": (lambda: tcuda.uniform_(host), _Is(lambda e: isinstance(e, ValueError), "ValueError")),
        "normal_": (lambda: tcuda.normal_(host), _Is(lambda e: isinstance(e, ValueError), "ValueError")),
        "random_": (lambda: tcuda.random_(host), _Is(lambda e: isinstance(e, ValueError), "ValueError")),
        # graphs
        "CUDAGraph": (lambda: tcuda.CUDAGraph().raw_cuda_graph_exec(), 0),   # torch raises here: see docs
        "graph": (lambda: _enter(tcuda.graph(tcuda.CUDAGraph())), _NA),
        "graph_pool_handle": (tcuda.graph_pool_handle, _Is(lambda v: v[0] == 0 and v[1] > 0, "(0, uid)")),
        "is_current_stream_capturing": (tcuda.is_current_stream_capturing, False),
        "make_graphed_callables": (lambda: tcuda.make_graphed_callables(None, ()),
                                   _Is(lambda e: isinstance(e, NotImplementedError), "NotImplementedError")),
        # the package itself
        "Tensor": (lambda: tcuda.Tensor.__name__, "Tensor"),
        "TcudaError": (lambda: issubclass(tcuda.TcudaError, RuntimeError), True),
        "OutOfMemoryError": (lambda: issubclass(tcuda.OutOfMemoryError, tcuda.TcudaError), True),
        "ConfigError": (lambda: issubclass(tcuda.ConfigError, (tcuda.TcudaError, ValueError)), True),
        "library_path": (tcuda.library_path, _Is(os.path.isabs, "an absolute path")),
        "library_version": (tcuda.library_version, tcuda.__version__),
        # snapshots: no GPU needed (tests/python/test_whatif.py runs real ones)
        "whatif_compare": (lambda: tcuda.whatif_compare(str(tmp_path / "missing.pickle"), str(tmp_path / "b")),
                           _Is(lambda e: isinstance(e, tcuda.TcudaError) and "before: " in str(e),
                               "TcudaError naming the argument")),
        "whatif": (lambda: tcuda.whatif(str(tmp_path / "missing.pickle")),
                   _Is(lambda e: isinstance(e, tcuda.TcudaError) and "missing.pickle" in str(e),
                       "TcudaError naming the missing file")),
        "parse_size": (lambda: tcuda.parse_size("80GiB"), 80 << 30),
        # torch.cuda.memory's private history names
        "_record_memory_history": (tcuda.memory._record_memory_history, _NA),
        "_snapshot": (tcuda.memory._snapshot, _Is(lambda v: v["segments"] == [], "no segments")),
        "_dump_snapshot": (lambda: tcuda.memory._dump_snapshot(str(tmp_path / "s.pickle")), None),
    }


def _public_names():
    import types
    return sorted(n for n in tcuda.__all__ if not isinstance(getattr(tcuda, n), types.ModuleType)) + \
        sorted(n for n in tcuda.memory.__all__ if n not in tcuda.__all__) + \
        ["_record_memory_history", "_snapshot", "_dump_snapshot"]


@gpu_absent
def test_every_public_name_without_gpu(tmp_path):
    rows = _no_gpu_rows(tmp_path)
    assert sorted(set(_public_names()) - set(rows)) == [], "public names without a no-GPU row"
    assert sorted(set(rows) - set(_public_names())) == [], "rows for names that are not public"
    bad = []
    for name, (call, want) in sorted(rows.items()):
        try:
            got = call()
        except Exception as e:  # noqa: BLE001 - the outcome is what is checked
            if want is _NA and isinstance(e, tcuda.TcudaError) and e.name == "TCUDA_ERROR_NOT_AVAILABLE" \
                    and "CUDA is not available" in str(e):
                continue
            if isinstance(want, _Is) and want.pred(e):
                continue
            bad.append("%s raised %s: %s" % (name, type(e).__name__, e))
            continue
        if want is _NA or (isinstance(want, _Is) and not want.pred(got)) or \
                (not isinstance(want, _Is) and want is not _NA and got != want):
            bad.append("%s returned %r, expected %s" % (name, got, getattr(want, "what", want)))
    assert not bad, "\n".join(bad)
    assert tcuda.is_initialized() is False   # nothing above initialised tcuda


def test_memory_history_signature_and_arguments(tmp_path):
    import inspect
    mem = tcuda.memory
    params = list(inspect.signature(mem._record_memory_history).parameters)
    assert params == ["enabled", "context", "stacks", "max_entries", "device", "clear_history", "compile_context",
                      "global_record_annotations", "skip_actions", "record_pinned_host_memory", "record_cuda"]
    defaults = inspect.signature(mem._record_memory_history).parameters
    assert defaults["enabled"].default == "all" and defaults["max_entries"].default == sys.maxsize
    for bad, what in (({"enabled": "some"}, "enabled"), ({"context": "x"}, "context"), ({"stacks": "cpp"}, "stacks")):
        with pytest.raises(RuntimeError, match="expected " + what):
            mem._record_memory_history(**bad)
    with pytest.raises(ValueError, match="negative"):
        mem._record_memory_history(max_entries=-1)
    with pytest.raises(NotImplementedError, match="skip_actions"):
        mem._record_memory_history(skip_actions=["alloc"])
    with pytest.raises(NotImplementedError, match="record_pinned_host_memory"):
        mem._record_memory_history(record_pinned_host_memory=True)
    with pytest.raises(ValueError, match="NUL"):
        mem._dump_snapshot("x\0y")
    _raises(lambda: mem._dump_snapshot(str(tmp_path / "missing" / "s.pickle")), "TCUDA_ERROR_IO")


def test_snapshot_is_the_dumped_document(tmp_path):
    import pickle
    snap = tcuda.memory._snapshot()
    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}
    assert isinstance(snap["device_traces"], list) and all(isinstance(t, list) for t in snap["device_traces"])
    path = tmp_path / "dump_snapshot.pickle"
    tcuda.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        assert pickle.load(f) == snap
    assert snap["allocator_settings"]["max_split_size"] == -1 or tcuda.is_initialized()


@gpu_absent
def test_memory_history_without_gpu():
    for call in (tcuda.memory._record_memory_history, lambda: tcuda.memory._record_memory_history(None),
                 lambda: tcuda.memory._record_memory_history(True, trace_alloc_max_entries=10)):
        _raises(call, "TCUDA_ERROR_NOT_AVAILABLE", "CUDA is not available")


# ---- NVML readings, against a stand-in libnvidia-ml built here ----

_FAKE_NVML = r"""
#include <string.h>
typedef struct { unsigned gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;
static int inited;
int nvmlInit_v2(void) { inited = 1; return 0; }
const char *nvmlErrorString(int r) { return r == 6 ? "Not Found" : "Unknown Error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **h) {
  if (!inited) return 1;
  if (strcmp(bus, "0000:1b:00.0")) return 6;
  *h = (void *)0x5a; return 0;
}
#define DEV(h) if ((h) != (void *)0x5a) return 2
int nvmlDeviceGetIndex(void *h, unsigned *i) { DEV(h); *i = 3; return 0; }
int nvmlDeviceGetUtilizationRates(void *h, util_t *u) { DEV(h); u->gpu = 42; u->memory = 17; return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) { DEV(h); m->total = 80ull << 30; m->used = 20ull << 30;
  m->free = m->total - m->used; return 0; }
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned *t) { DEV(h); if (sensor != 0) return 2; *t = 55;
  return 0; }
int nvmlDeviceGetPowerUsage(void *h, unsigned *p) { DEV(h); *p = 123456; return 0; }
int nvmlDeviceGetClockInfo(void *h, int type, unsigned *c) { DEV(h); if (type != 1) return 2; *c = 1980;
  return 0; }
int nvmlDeviceGetComputeRunningProcesses_v2(void *h, unsigned *n, proc_t *p) {
  DEV(h);
  if (*n < 2) { *n = 2; return 7; }
  p[0] = (proc_t){1234, 1ull << 30, 0, 0}; p[1] = (proc_t){99, 5ull << 20, 0, 0}; *n = 2; return 0;
}
"""


@pytest.fixture
def fake_nvml(tmp_path, monkeypatch):
    import shutil
    from tcuda import _nvml
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to build a stand-in NVML")
    src, so = tmp_path / "nvml.c", tmp_path / "libnvidia-ml.so.1"
    src.write_text(_FAKE_NVML)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    monkeypatch.setattr(_nvml, "_LIBRARY", str(so))
    monkeypatch.setattr(_nvml, "_nvml", None)
    monkeypatch.setattr(_nvml, "_pci_bus_id", lambda device: b"0000:1b:00.0" if device in (None, 0) else b"0:9:0.0")
    return _nvml


def test_nvml_readings_and_torchs_process_list(fake_nvml):
    assert tcuda.utilization() == 42 and tcuda.memory_usage(0) == 17
    assert tcuda.device_memory_used() == 20 << 30
    assert tcuda.temperature() == 55 and tcuda.power_draw() == 123456 and tcuda.clock_rate() == 1980
    assert tcuda.list_gpu_processes() == ("GPU:3\n"
                                          "process       1234 uses     1024.000 MB GPU memory\n"
                                          "process         99 uses        5.000 MB GPU memory")
    assert tcuda.memory.list_gpu_processes is tcuda.list_gpu_processes
    e = _raises_nvml(lambda: tcuda.utilization(1))
    assert e.name == "TCUDA_ERROR_CUDA" and "nvmlDeviceGetHandleByPciBusId" in str(e) and "Not Found" in str(e)


def _raises_nvml(call):
    with pytest.raises(tcuda.TcudaError) as ei:
        call()
    return ei.value


def test_nvml_absent_raises_and_process_list_says_so(monkeypatch, tmp_path):
    from tcuda import _nvml
    monkeypatch.setattr(_nvml, "_LIBRARY", str(tmp_path / "no-libnvidia-ml.so.1"))
    monkeypatch.setattr(_nvml, "_nvml", None)
    for fn in (tcuda.utilization, tcuda.memory_usage, tcuda.temperature, tcuda.power_draw, tcuda.clock_rate,
               tcuda.device_memory_used):
        e = _raises_nvml(fn)
        assert e.name == "TCUDA_ERROR_NOT_AVAILABLE" and "NVML is not available" in str(e), str(e)
        assert fn.__name__ in str(e)
    msg = tcuda.list_gpu_processes()          # torch returns a message here instead of raising
    assert "NVML is not available" in msg


def test_comm_engine_option_round_trips_and_checks_its_argument():
    import tcuda
    assert tcuda.comm.get_engine() == "auto"
    try:
        for e in ("nccl", "copy", "auto"):
            tcuda.comm.set_engine(e)
            assert tcuda.comm.get_engine() == e
        with pytest.raises(ValueError, match="engine 'gauss'"):
            tcuda.comm.set_engine("gauss")
        assert tcuda.comm.get_engine() == "auto"
    finally:
        tcuda.comm.set_engine("auto")
