"""tcuda.whatif: a PyTorch memory snapshot's history replayed under other
allocator configs or a memory limit (tcuda_whatif_file/_buffer). No GPU
and no torch needed.

A snapshot given as a file is read by libtcuda's restricted pickle reader
(plain data only; nothing in it runs). One given as a dict (what
torch.cuda.memory._snapshot() returns) is handed over as JSON. This module
never unpickles anything itself.
"""
import ctypes
import json
import math
import numbers
import os
import re
from ctypes import byref, c_char_p, c_uint64, c_void_p

from ._lib import WhatifOptionsT, c_path, c_string, check, int_arg, lib, take_string, uint64_arg

__all__ = ["whatif", "parse_size"]

_MAX_CONFIGS = 255  # the library's rows, less the recorded one
_MAX_DEPTH = 512  # the library's readers nest no deeper (TC_PV_MAX_DEPTH)


def _where(path):
    return "snapshot" + "".join("[%r]" % (k,) for k in path)


def _find_unencodable(value, path=(), inside=None):
    """(path, problem, exception class) of the first value JSON cannot
    carry, or None. inside: the ids of the containers on the path, so that
    one that contains itself is named, not recursed into forever."""
    if inside is None:
        inside = set()
    if isinstance(value, (dict, list, tuple)):
        if id(value) in inside:
            return path, "contains itself (a circular reference), which JSON cannot carry", ValueError
        if len(inside) >= _MAX_DEPTH:
            return path, "nests deeper than %d levels" % _MAX_DEPTH, ValueError
        inside.add(id(value))
        try:
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(k, (str, int, float, bool)) and k is not None:
                        return path, "has a key %r of type %s, which JSON cannot carry" % (k, type(k).__name__), \
                            TypeError
                    found = _find_unencodable(v, path + (k,), inside)
                    if found:
                        return found
            else:
                for i, v in enumerate(value):
                    found = _find_unencodable(v, path + (i,), inside)
                    if found:
                        return found
            return None
        finally:
            inside.discard(id(value))
    if isinstance(value, float) and not math.isfinite(value):
        return path, "is %r, which JSON cannot carry" % value, ValueError
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return path, "is bytes, which JSON cannot carry (decode it to str)", TypeError
    return path, "is a %s, which JSON cannot carry" % type(value).__name__, TypeError


# A lone surrogate (a file name decoded with surrogateescape, say) as
# 'surrogatepass' writes it: three bytes that are not UTF-8.
_LONE_SURROGATE = re.compile(b"\xed[\xa0-\xbf][\x80-\xbf]")


def _snapshot_json(snapshot):
    """The dict as JSON bytes: tuples become lists, as they do in torch's
    own JSON form of a snapshot. A str's lone surrogates become U+FFFD, as
    the library's pickle reader makes them of the same str pickled."""
    try:
        text = json.dumps(snapshot, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, OverflowError, RecursionError):
        try:
            found = _find_unencodable(snapshot)
        except RecursionError:
            found = ((), "nests too deeply for JSON", ValueError)
        if not found:
            raise
        path, problem, exc = found
        raise exc("tcuda.whatif: %s %s" % (_where(path), problem)) from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(b"\xef\xbf\xbd", text.encode("utf-8", "surrogatepass"))


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


_GRID = 2 << 20  # the allocator's 2 MiB grid: the smallest simulated device


def parse_size(text, name="size"):
    """A byte count written as the CLI's size options take it: an int, or a
    str such as "150109880320", "0x1000", "80GB" (powers of 1000) or "80GiB"
    (powers of 1024); libtcuda's parser (tcuda_size_parse), so both read the
    same text alike. ValueError names `name` for a bad one."""
    if _is_int(text):
        if text <= 0:
            raise ValueError("%s %d is not a positive byte count" % (name, text))
        return uint64_arg(text, name)
    if not isinstance(text, str):
        raise TypeError("%s must be an int or a str such as '80GiB', not %s" % (name, type(text).__name__))
    out = c_uint64()
    if lib.tcuda_size_parse(c_string(text, name), byref(out)):
        msg = (lib.tcuda_last_error() or b"").decode("utf-8", "replace")
        raise ValueError("%s %s" % (name, msg.split("tcuda_size_parse: size ", 1)[-1]))
    return out.value


def _size_arg(F, name, v):
    try:
        return parse_size(v, name)
    except (TypeError, ValueError) as e:
        raise type(e)("%s: %s" % (F, e)) from None


def _capacity_arg(F, capacity):
    n = _size_arg(F, "capacity", capacity)
    if n < _GRID:
        raise ValueError("%s: capacity %r: under 2 MiB, the allocator's grid" % (F, capacity))
    return n


def _whole(F, name, v, lo, hi, noun):
    """The CLI's rule for a whole-number option (cli_parse_whole), with its words."""
    if not _is_int(v):
        raise TypeError("%s: %s must be an int, not %s" % (F, name, type(v).__name__))
    if not lo <= v <= hi:
        raise ValueError("%s: %s %d is not a valid %s: %s %d"
                         % (F, name, v, noun, "at least" if v < lo else "at most", lo if v < lo else hi))
    return v


def _budget_arg(F, work_budget):
    if not _is_int(work_budget):
        raise TypeError("%s: work_budget must be an int or None, not %s" % (F, type(work_budget).__name__))
    n = uint64_arg(work_budget, "work_budget")
    _whole(F, "work_budget", work_budget, 1, (1 << 64) - 1, "work budget")
    return n


def whatif(snapshot, configs=None, capacity=None, fraction=None, device=0, *, threads=None, series_points=0,
           max_input=None, work_budget=None):
    """What would other allocator configs, or a memory limit, do to the
    history in a PyTorch memory snapshot? Returns the library's document as
    a dict: {"snapshot": {...}, "configs": [rows], "recommended": {...} or
    None (the lowest min_limit), "recommended_reserved": {...} or None (the
    lowest peak reserved with no OOM), "recommendation_withheld": str or
    None, "notes": [...]}; docs/whatif.md describes it.

    snapshot: a path (str or os.PathLike) to torch.cuda.memory._dump_snapshot()'s
        pickle or its JSON form, either of them gzip-compressed (.pickle.gz),
        "-" for standard input, or the dict torch.cuda.memory._snapshot() returns.
    configs: PYTORCH_CUDA_ALLOC_CONF strings, one row each after the recorded
        config's row; None: the default sweep.
    capacity: the simulated device's bytes, an int or a str with a unit as
        the CLI's --capacity takes it ("80GiB", "80GB"), at least 2 MiB;
        None: an H200's.
    fraction: set_per_process_memory_fraction for every row, in (0, 1]; None: no
        limit, or the one inferred from the history's OOMs.
    device: whose history, for a snapshot of several devices.
    threads: rows replayed at once, 1 to 256; None: one per CPU.
    series_points: > 0 gives each row a "series" of reserved and allocated
        bytes over the history's time, at up to that many points: the
        maxima since the previous point and the minima ("reserved_min",
        "allocated_min").
    max_input: the largest snapshot read, in bytes (an int or a str with a
        unit), for the file and for a .gz file's decompressed bytes alike;
        None: 1 GiB.
    work_budget: the work the snapshot may cost, in units (docs/whatif.md);
        None: a multiple of its size.
    """
    if isinstance(snapshot, dict):
        data = _snapshot_json(snapshot)
        path = None
    elif isinstance(snapshot, (str, os.PathLike)):
        path = c_path(snapshot, "snapshot")
    else:
        raise TypeError("tcuda.whatif: snapshot must be a path (str or os.PathLike) or the dict "
                        "torch.cuda.memory._snapshot() returns, not %s" % type(snapshot).__name__)

    opts = WhatifOptionsT()
    opts.struct_size = ctypes.sizeof(WhatifOptionsT)
    keep = None
    if configs is not None:
        if isinstance(configs, (str, bytes)) or not hasattr(configs, "__iter__"):
            raise TypeError("tcuda.whatif: configs must be a list of config strings (or None for the default "
                            "sweep), not %s" % type(configs).__name__)
        configs = list(configs)
        if not configs:
            raise ValueError("tcuda.whatif: configs is empty; pass None for the default sweep")
        if len(configs) > _MAX_CONFIGS:
            raise ValueError("tcuda.whatif: configs has %d entries, more than %d" % (len(configs), _MAX_CONFIGS))
        for i, c in enumerate(configs):
            if not isinstance(c, str):
                raise TypeError("tcuda.whatif: configs[%d] must be a str, not %s" % (i, type(c).__name__))
        keep = (c_char_p * len(configs))(*[c_string(c, "configs[%d]" % i) for i, c in enumerate(configs)])
        opts.configs = ctypes.cast(keep, ctypes.POINTER(c_char_p))
        opts.num_configs = len(configs)
    if capacity is not None:
        opts.capacity = _capacity_arg("tcuda.whatif", capacity)
    if fraction is not None:
        if not isinstance(fraction, numbers.Real) or isinstance(fraction, bool):
            raise TypeError("tcuda.whatif: fraction must be a number in (0, 1] or None, not %s"
                            % type(fraction).__name__)
        if not 0 < fraction <= 1:
            raise ValueError("tcuda.whatif: fraction %r is not in (0, 1] (None: no limit)" % (fraction,))
        opts.memory_fraction = float(fraction)
    # The CLI's ranges and words (tools/cmd_whatif.c): --device, --threads,
    # --work-budget.
    _whole("tcuda.whatif", "device", device, 0, 1023, "device index")
    if threads is not None:
        _whole("tcuda.whatif", "threads", threads, 1, 256, "thread count")
    if not _is_int(series_points):
        raise TypeError("tcuda.whatif: series_points must be an int, not %s" % type(series_points).__name__)
    if series_points < 0:
        raise ValueError("tcuda.whatif: series_points %d is negative" % series_points)
    if max_input is not None:
        opts.max_input_bytes = _size_arg("tcuda.whatif", "max_input", max_input)
    if work_budget is not None:
        opts.work_budget = _budget_arg("tcuda.whatif", work_budget)
    opts.device = int_arg(device, "device")
    opts.threads = int_arg(threads or 0, "threads")
    opts.series_points = int_arg(series_points, "series_points")

    out = c_void_p()  # `keep` holds the config strings until the call returns
    if path is not None:
        check(lib.tcuda_whatif_file(path, byref(opts), byref(out)))
    else:
        check(lib.tcuda_whatif_buffer(data, len(data), byref(opts), byref(out)))
    return json.loads(take_string(out))


def whatif_compare(before, after, capacity=None, fraction=None, device=None, *, max_input=None, work_budget=None):
    """Two snapshots, before and after a change, each replayed under its own
    recorded config: returns the library's document as a dict, {"before":
    {...}, "after": {...}, "change": {...}, "holders_at_peak_reserved":
    [...], "before_explain": {...}, "after_explain": {...}} (peaks, their
    ratio, OOM counts, and what holds the memory at each peak; docs/whatif.md,
    "What holds the memory"). The same as `tcuda compare BEFORE AFTER --json`.

    before, after: paths (str or os.PathLike) to _dump_snapshot()'s pickles
        or their JSON form, either gzipped (.pickle.gz), or one of them "-"
        for standard input. Errors name the argument ("before: PATH: ...").
    capacity, fraction, max_input, work_budget: as for tcuda.whatif.
    device: whose history; None: 0, and both snapshots must record as many
        devices.
    """
    F = "tcuda.whatif_compare"
    paths = []
    for name, p in (("before", before), ("after", after)):
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError("%s: %s must be a path (str or os.PathLike), not %s" % (F, name, type(p).__name__))
        paths.append(c_path(p, name))
    opts = WhatifOptionsT()
    opts.struct_size = ctypes.sizeof(WhatifOptionsT)
    opts.device = -1
    if capacity is not None:
        opts.capacity = _capacity_arg(F, capacity)
    if fraction is not None:
        if not isinstance(fraction, numbers.Real) or isinstance(fraction, bool):
            raise TypeError("%s: fraction must be a number in (0, 1] or None, not %s" % (F, type(fraction).__name__))
        if not 0 < fraction <= 1:
            raise ValueError("%s: fraction %r is not in (0, 1] (None: no limit)" % (F, fraction))
        opts.memory_fraction = float(fraction)
    # the CLI's ranges and words (tools/cmd_compare.c), as tcuda.whatif
    if device is not None:
        opts.device = int_arg(_whole(F, "device", device, 0, 1023, "device index"), "device")
    if max_input is not None:
        opts.max_input_bytes = _size_arg(F, "max_input", max_input)
    if work_budget is not None:
        opts.work_budget = _budget_arg(F, work_budget)
    out = c_void_p()
    check(lib.tcuda_whatif_compare_files(paths[0], paths[1], byref(opts), byref(out)))
    return json.loads(take_string(out))
