"""Route PyTorch's or CuPy's device memory through tcuda's caching
allocator; tcuda.memory_stats(), memory_summary() and memory_snapshot()
then describe the framework's memory."""
import ctypes

from ._lib import lib, library_path

__all__ = ["torch_allocator", "use_in_torch", "cupy_allocator", "use_in_cupy"]


def torch_allocator():
    """torch.cuda.memory.CUDAPluggableAllocator over this package's libtcuda
    (the same library instance, so this package's stats see torch's memory)."""
    import torch
    return torch.cuda.memory.CUDAPluggableAllocator(library_path(), "tcuda_torch_malloc", "tcuda_torch_free")


def use_in_torch():
    """Make tcuda PyTorch's CUDA allocator through torch's pluggable
    allocator (malloc and free only). Prefer tcuda.torch.install(), which
    gives torch's whole memory API and OOM errors (torch 2.11); this stays
    for other torch versions. Call it before torch's first CUDA allocation.
    Memory is keyed by torch's current stream; torch does not forward
    record_stream() or empty_cache() to pluggable allocators (use
    tcuda.empty_cache()), and an OOM reaches torch as a NULL pointer."""
    import torch
    alloc = torch_allocator()
    torch.cuda.memory.change_current_allocator(alloc)
    return alloc


def _fn_address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def _cupy_malloc_checked(stream):
    from ._lib import error_from

    def malloc(size, device_id):
        p = lib.tcuda_cupy_malloc(stream, size, device_id)
        if not p and size:
            raise error_from(lib.tcuda_last_status())
        return p or 0

    def free(ptr, device_id):
        lib.tcuda_cupy_free(stream, ptr or None, device_id)

    return malloc, free


def cupy_allocator(stream=None, checked=False):
    """A CuPy allocator over tcuda. stream: None for tcuda's current stream
    of the device at each allocation, or a stream (CuPy's, torch's or
    tcuda's: anything with .ptr / .cuda_stream, or an int cudaStream_t) that
    all allocations belong to.

    checked=False gives cupy.cuda.memory.CFunctionAllocator with libtcuda's
    C functions (no Python per allocation); CuPy does not check that
    allocator's result, so an OOM surfaces as a NULL pointer. checked=True
    gives a PythonFunctionAllocator that raises tcuda.OutOfMemoryError."""
    import cupy
    if stream is None:
        raw = None
    elif isinstance(stream, int):
        raw = stream
    else:
        raw = getattr(stream, "ptr", None)
        if raw is None:
            raw = stream.cuda_stream
    if checked:
        return cupy.cuda.memory.PythonFunctionAllocator(*_cupy_malloc_checked(raw))
    return cupy.cuda.memory.CFunctionAllocator(raw or 0, _fn_address(lib.tcuda_cupy_malloc),
                                               _fn_address(lib.tcuda_cupy_free), lib)


def use_in_cupy(stream=None, checked=False):
    """cupy.cuda.set_allocator(cupy_allocator(...).malloc); returns the allocator."""
    import cupy
    alloc = cupy_allocator(stream, checked)
    cupy.cuda.set_allocator(alloc.malloc)
    return alloc
