"""tcuda: torch.cuda's API in Python, on libtcuda (no torch needed).

    import tcuda
    if tcuda.is_available():
        s = tcuda.Stream()
        with tcuda.stream(s):
            p = tcuda.caching_allocator_alloc(1 << 20)
        print(tcuda.memory_summary())
        g = tcuda.CUDAGraph()
        with tcuda.graph(g):
            tcuda.uniform_(static_buffer)   # torch, CuPy, ... tensor made before
        g.replay()

Names and signatures follow torch.cuda; see docs/python.md for the
differences (tensors are DLPack objects, RNG states are bytes). Errors
raise tcuda.TcudaError (OutOfMemoryError for OOM) with tcuda's message.
tcuda.interop routes PyTorch's or CuPy's memory through tcuda.
tcuda.whatif(snapshot) replays a torch memory snapshot's history under
other allocator configs or a limit (no GPU needed).
"""
from ._lib import ConfigError, OutOfMemoryError, TcudaError, library_path, lib as _libtcuda
from ._device import (can_device_access_peer, current_blas_handle, current_device, device, device_count, device_of,
                      get_arch_list, get_device_capability, get_device_name, get_device_properties, get_gencode_flags,
                      init, ipc_collect, is_available, is_bf16_supported, is_initialized, is_tf32_supported,
                      mem_get_info, set_device, synchronize, unavailable_reason)
from ._nvml import (clock_rate, device_memory_used, list_gpu_processes, memory_usage, power_draw, temperature,
                    utilization)
from .streams import (Event, ExternalStream, Stream, StreamContext, current_stream, default_stream,
                      get_stream_from_external, set_stream, stream)
from .memory import (caching_allocator_alloc, caching_allocator_delete, empty_cache, empty_host_cache,
                     get_allocator_backend, get_allocator_settings, get_per_process_memory_fraction, host_alloc,
                     host_empty_cache, host_free, host_memory_stats, host_memory_stats_as_nested_dict,
                     host_record_stream, max_memory_allocated, max_memory_cached, max_memory_reserved,
                     memory_allocated, memory_cached, memory_reserved, memory_snapshot, memory_stats,
                     memory_stats_as_nested_dict, memory_summary, reset_accumulated_host_memory_stats,
                     reset_accumulated_memory_stats, reset_max_memory_allocated, reset_max_memory_cached,
                     reset_peak_host_memory_stats, reset_peak_memory_stats, set_allocator_settings,
                     set_per_process_memory_fraction)
from .random import (Generator, default_generator, get_rng_state, get_rng_state_all, initial_seed, manual_seed,
                     manual_seed_all, normal_, random_, seed, seed_all, set_rng_state, set_rng_state_all, uniform_)
from .graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from ._dlpack import Tensor
from ._whatif import parse_size, whatif
from . import comm, graphs, interop, memory, nvtx, random, streams
from ._whatif import whatif_compare

__version__ = "0.1.0"


def library_version():
    """libtcuda's version string, e.g. "0.1.0"."""
    return _libtcuda.tcuda_version_string().decode()


def __getattr__(name):
    # torch.cuda.default_generators: one default generator per device, () without CUDA.
    if name == "default_generators":
        return tuple(default_generator(i) for i in range(device_count()))
    if name == "torch":  # tcuda under torch; imported on use, as it imports torch when installing
        import importlib
        return importlib.import_module("tcuda.torch")
    raise AttributeError("module 'tcuda' has no attribute %r" % name)


__all__ = [n for n in dir() if not n.startswith("_")] + ["default_generators"]
