"""CUDA graphs: torch.cuda.CUDAGraph, graph(...), graph_pool_handle() and
is_current_stream_capturing(), over libtcuda's tcuda_graph_* API.

    g = tcuda.CUDAGraph()
    with tcuda.graph(g):              # captures on a side stream
        tcuda.uniform_(static_out)    # any work queued on tcuda's current stream
    g.replay()                        # redoes it; RNG fills draw fresh numbers

Pool tokens are (int, int) tuples, as torch's.
"""
import ctypes
from ctypes import byref, c_int, c_size_t, c_void_p

from ._lib import GraphPoolT, GraphScopeT, c_path, c_string, check, lib, uint64_arg

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"]


def _mode(capture_error_mode):
    # The library parses the name, so a bad one gets torch's message.
    m = c_int()
    check(lib.tcuda_graph_capture_mode_from_name(c_string(capture_error_mode, "capture_error_mode"), byref(m)))
    return m.value


def _pool(pool):
    """None, or a (int, int) token -> a tcuda_graph_pool_t pointer (or None)."""
    if pool is None:
        return None
    try:
        a, b = (int(x) for x in pool)
    except (TypeError, ValueError):
        raise TypeError("tcuda: a graph pool is a pair of ints from graph_pool_handle() or CUDAGraph.pool(), "
                        "got %r" % (pool,)) from None
    p = GraphPoolT()
    p.id[0], p.id[1] = uint64_arg(a, "pool id"), uint64_arg(b, "pool id")
    return ctypes.pointer(p)


def graph_pool_handle():
    """A new memory-pool token for captures to share: (0, uid)."""
    p = GraphPoolT()
    check(lib.tcuda_graph_pool_handle(byref(p)))
    return (p.id[0], p.id[1])


def is_current_stream_capturing():
    """True while the current stream of the current device is capturing
    (False without CUDA or before tcuda is initialised, as torch)."""
    c = c_int()
    check(lib.tcuda_is_current_stream_capturing(byref(c)))
    return bool(c.value)


class CUDAGraph:
    """torch.cuda.CUDAGraph: capture_begin/capture_end around work on the
    current stream (a non-default one), then replay() as often as wanted."""

    def __init__(self, keep_graph=False):
        if keep_graph:
            # libtcuda instantiates at capture_end; enable_debug_mode() keeps the graph for debug_dump.
            raise NotImplementedError("tcuda.CUDAGraph: keep_graph=True is not supported; use "
                                      "enable_debug_mode() to keep the graph for debug_dump")
        self._g = None
        g = c_void_p()
        check(lib.tcuda_graph_create(byref(g)))
        self._g = g
        self._generators = []  # registered generators must outlive the graph

    def __del__(self):
        g = getattr(self, "_g", None)
        if g is not None and g.value:
            self._g = None
            try:
                lib.tcuda_graph_destroy(g)  # a failure here has nowhere to go (torch only warns)
            except Exception:  # interpreter shutdown
                pass

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Start capturing the current stream. Prefer `with tcuda.graph(self)`."""
        mode = _mode(capture_error_mode)
        check(lib.tcuda_graph_capture_begin(self._g, _pool(pool), mode))

    def capture_end(self):
        check(lib.tcuda_graph_capture_end(self._g))

    def replay(self, stream=None):
        """Launch the captured work on the current stream (or `stream`)."""
        check(lib.tcuda_graph_replay(self._g, None if stream is None else byref(stream._s)))

    def reset(self):
        check(lib.tcuda_graph_reset(self._g))

    def pool(self):
        """This graph's pool token, for another capture to share."""
        p = GraphPoolT()
        check(lib.tcuda_graph_pool(self._g, byref(p)))
        return (p.id[0], p.id[1])

    def enable_debug_mode(self):
        """Process-wide, as torch: graphs captured from now on keep their
        cudaGraph_t for debug_dump."""
        lib.tcuda_graph_enable_debug_mode()

    def debug_dump(self, debug_path):
        """Write the graph as Graphviz DOT (needs enable_debug_mode() before capture_end)."""
        check(lib.tcuda_graph_debug_dump(self._g, c_path(debug_path, "debug_path")))

    def register_generator_state(self, generator):
        """Captures of this graph use `generator` (a tcuda.Generator) graph-safely."""
        check(lib.tcuda_graph_register_generator(self._g, generator._g))
        self._generators.append(generator)

    def num_nodes(self):
        """Nodes in the captured graph (not in torch; 0 for an empty capture)."""
        n = c_size_t()
        check(lib.tcuda_graph_num_nodes(self._g, byref(n)))
        return n.value

    def raw_cuda_graph_exec(self):
        """The cudaGraphExec_t as an int (0 before a finished capture); tcuda owns it."""
        return lib.tcuda_graph_exec_handle(self._g) or 0


class graph:
    """with tcuda.graph(g, pool=None, stream=None, capture_error_mode="global"):
    synchronizes, empties the cache, makes `stream` current (default: a side
    stream tcuda keeps per device) and captures into g; on exit the capture
    ends and the previous streams and device come back."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_stream = stream
        self._mode = _mode(capture_error_mode)
        self._scope = None

    def __enter__(self):
        sc = GraphScopeT()
        st = self.capture_stream
        check(lib.tcuda_graph_capture_scope_begin(byref(sc), self.cuda_graph._g, _pool(self.pool),
                                                  None if st is None else byref(st._s), self._mode))
        self._scope = sc
        return None  # as torch's

    def __exit__(self, exc_type, exc, tb):
        sc, self._scope = self._scope, None
        status = lib.tcuda_graph_capture_scope_end(byref(sc))
        if status and exc_type is None:
            check(status)
        # With an exception in flight the capture is discarded either way;
        # raising here would hide the user's error behind "Invalid capture".
        return False


def make_graphed_callables(*args, **kwargs):
    """Not provided: torch's version wraps autograd Functions around torch
    modules. From C, tcuda_graph_capture_fn does the warm-up and capture."""
    raise NotImplementedError("tcuda.make_graphed_callables is not provided (it needs torch autograd); capture "
                              "with tcuda.graph() and replay, or use tcuda_graph_capture_fn from C")
