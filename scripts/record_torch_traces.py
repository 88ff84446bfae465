#!/usr/bin/env python3
"""Record PyTorch's own allocator behaviour for each trace: the ground truth
that tcuda's replay must reproduce. Run it on the GPU machine.

Usage: scripts/record_torch_traces.py [--out DIR] [--tar FILE] [--traces DIR] [-j N] [NAME ...]
  --out DIR     where results go (default: $OUT/torch-traces, else ./torch-traces)
  --tar FILE    also pack DIR into FILE (.tgz). With no --out and $OUT set, this
                is $OUT/torch-traces.tgz and the loose folder is removed: only
                8 files come back from $OUT
  --traces DIR  the traces (default: tests/data/torch beside this script)
  -j N          traces recorded at once, each in its own process (default 4)
  NAME ...      only these traces (file names without .trace)
  --check       parse every trace and exit; needs no torch or GPU

Each trace runs in a fresh python3 process with PYTORCH_CUDA_ALLOC_CONF taken
from NAME.config (unset when there is none). The process replays the trace
through torch.cuda.caching_allocator_alloc / caching_allocator_delete
(stream 0 = the default stream; side stream k is a torch.cuda.Stream()
created at its first use in the trace), with
torch.cuda.memory._record_memory_history on from the start, and writes:

  NAME.expected.json  JSON array, one {"stats": {...}, "segments": [...]} per
                      'c' line: memory_stats() (every key, ints) and
                      memory_snapshot() segments sorted by address, "stream"
                      being the trace's stream number, keeping address,
                      total_size, allocated_size, active_size, requested_size,
                      stream, segment_type, segment_pool_id, is_expandable and
                      blocks [address, size, requested_size, state]
  NAME.addresses      the 'segment_alloc' trace entries in order (the
                      addresses cudaMalloc returned): "ADDR SIZE", decimal,
                      one per line; empty for expandable-segments traces
  NAME.maps           expandable segments only: the 'segment_map' entries in
                      order, "ADDR SIZE", decimal: each is one contiguous
                      range that was mapped (ADDR inside the segment's
                      reserved virtual range, SIZE a multiple of the page
                      size, 2 MiB small pool / 20 MiB large pool)
  NAME.segtrace       every segment_* trace entry in order:
                      "ACTION ADDR SIZE STREAM" (ACTION one of segment_alloc,
                      segment_free, segment_map, segment_unmap; STREAM the
                      trace's stream number)
  NAME.meta.json      torch/CUDA versions, device, config, allocator settings,
                      op and checkpoint counts, seconds taken
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEG_KEYS = ("address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "segment_pool_id", "is_expandable")
BLOCK_KEYS = ("address", "size", "requested_size", "state")
SEG_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
MAX_ENTRIES = 1000000
TRACE_TIMEOUT = 150


class TraceError(Exception):
    pass


def parse_trace(text):
    """Ops as tuples: ('a', id, size, stream), ('f', id), ('c',), ('e',), ('r',).
    The whole trace is checked before anything runs: a bad line never leaves a
    half-replayed recording."""
    ops = []
    live = set()
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tok = line.split()
        op = tok[0]
        try:
            if op == "a":
                if len(tok) not in (3, 4):
                    raise TraceError("'a ID SIZE [STREAM]' takes 2 or 3 arguments")
                hid, size = int(tok[1]), int(tok[2])
                stream = int(tok[3]) if len(tok) == 4 else 0
                if size < 0 or stream < 0 or hid < 0:
                    raise TraceError("negative value")
                if hid in live:
                    raise TraceError("id %d is already live" % hid)
                live.add(hid)
                ops.append(("a", hid, size, stream))
            elif op == "f":
                if len(tok) != 2:
                    raise TraceError("'f ID' takes 1 argument")
                hid = int(tok[1])
                if hid not in live:
                    raise TraceError("id %d is not live" % hid)
                live.discard(hid)
                ops.append(("f", hid))
            elif op in ("c", "e", "r"):
                if len(tok) != 1:
                    raise TraceError("'%s' takes no argument" % op)
                ops.append((op,))
            else:
                raise TraceError("unknown op %r" % op)
        except ValueError:
            raise TraceError("line %d: not an integer: %r" % (no, raw.strip()))
        except TraceError as e:
            raise TraceError("line %d: %s: %r" % (no, e, raw.strip()))
    return ops


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------ worker
def worker(trace_path, outdir):
    """Replay one trace in this (fresh) process and write its recordings."""
    name = os.path.basename(trace_path)[:-len(".trace")]
    with open(trace_path) as fh:
        ops = parse_trace(fh.read())
    t0 = time.time()
    import torch

    if not torch.cuda.is_available():
        print("ERROR %s: torch.cuda is not available" % name, file=sys.stderr)
        return 3
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=MAX_ENTRIES)
    dev = 0
    torch.cuda.set_device(dev)
    default = torch.cuda.default_stream(dev)
    streams = {0: default}            # trace number -> torch stream
    stream_no = {default.cuda_stream: 0}  # cudaStream_t value -> trace number
    unknown_streams = set()

    def map_stream(v):
        if v in stream_no:
            return stream_no[v]
        unknown_streams.add(v)
        return v

    alloc = torch.cuda.caching_allocator_alloc
    delete = torch.cuda.caching_allocator_delete
    ptrs = {}
    checkpoints = []

    def snapshot_segments():
        try:
            return torch.cuda.memory_snapshot(include_traces=False)  # skips copying the history
        except TypeError:
            return torch.cuda.memory_snapshot()

    def checkpoint():
        stats = {k: int(v) for k, v in torch.cuda.memory_stats(dev).items()}
        segs = []
        for s in sorted(snapshot_segments(), key=lambda s: s["address"]):
            if s.get("device", dev) != dev:
                continue
            seg = {}
            for k in SEG_KEYS:
                v = s.get(k)
                if k == "stream":
                    v = map_stream(v)
                elif k == "segment_pool_id" and v is not None:
                    v = list(v)
                seg[k] = v
            seg["blocks"] = [{k: b.get(k) for k in BLOCK_KEYS} for b in s.get("blocks", [])]
            segs.append(seg)
        checkpoints.append({"stats": stats, "segments": segs})

    for op in ops:
        kind = op[0]
        if kind == "a":
            _, hid, size, sno = op
            st = streams.get(sno)
            if st is None:
                st = torch.cuda.Stream(device=dev)
                streams[sno] = st
                stream_no[st.cuda_stream] = sno
            ptrs[hid] = alloc(size, dev, st)
        elif kind == "f":
            p = ptrs.pop(op[1])
            if p:  # size 0 gave a null pointer, which is never freed
                delete(p)
        elif kind == "c":
            checkpoint()
        elif kind == "e":
            torch.cuda.empty_cache()
        elif kind == "r":
            torch.cuda.reset_peak_memory_stats(dev)

    snap = torch.cuda.memory._snapshot()
    traces = snap.get("device_traces", [[]])
    entries = traces[dev] if len(traces) > dev else []
    if len(entries) >= MAX_ENTRIES:
        print("ERROR %s: trace ring buffer full (%d entries); segment order may be lost" % (name, len(entries)),
              file=sys.stderr)
        return 4
    seg_lines, allocs, maps = [], [], []
    for e in entries:
        act = e.get("action")
        if act not in SEG_ACTIONS:
            continue
        addr, size = int(e.get("addr", 0)), int(e.get("size", 0))
        seg_lines.append("%s %d %d %d" % (act, addr, size, map_stream(e.get("stream", 0))))
        if act == "segment_alloc":
            allocs.append("%d %d" % (addr, size))
        elif act == "segment_map":
            maps.append("%d %d" % (addr, size))

    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    write_atomic(os.path.join(outdir, name + ".expected.json"),
                 "[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in checkpoints) + "\n]\n")
    write_atomic(os.path.join(outdir, name + ".addresses"), "".join(l + "\n" for l in allocs))
    if maps or "expandable_segments" in conf:
        write_atomic(os.path.join(outdir, name + ".maps"), "".join(l + "\n" for l in maps))
    write_atomic(os.path.join(outdir, name + ".segtrace"), "".join(l + "\n" for l in seg_lines))
    props = torch.cuda.get_device_properties(dev)
    meta = {
        "trace": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": getattr(torch._C, "_cuda_getDriverVersion", lambda: None)(),
        "device": props.name,
        "total_memory": int(props.total_memory),
        "PYTORCH_CUDA_ALLOC_CONF": conf,
        "allocator_settings": snap.get("allocator_settings"),
        "ops": len(ops),
        "checkpoints": len(checkpoints),
        "segment_allocs": len(allocs),
        "segment_maps": len(maps),
        "side_streams": sorted(k for k in streams if k),
        "unknown_streams_in_snapshot": sorted(unknown_streams),
        "seconds": round(time.time() - t0, 3),
    }
    write_atomic(os.path.join(outdir, name + ".meta.json"), json.dumps(meta, indent=1, default=str) + "\n")
    if unknown_streams:
        print("WARNING %s: snapshot streams not created by the trace: %s" % (name, sorted(unknown_streams)),
              file=sys.stderr)
    print("ok %s: %d ops, %d checkpoints, %d segment_alloc, %d segment_map, %.1fs"
          % (name, len(ops), len(checkpoints), len(allocs), len(maps), time.time() - t0))
    return 0


# ------------------------------------------------------------------ driver
def main(argv):
    args = argv[1:]
    if len(args) == 3 and args[0] == "--worker":
        return worker(args[1], args[2])
    out = None
    tdir = os.path.join(ROOT, "tests", "data", "torch")
    jobs = 4
    tar = None
    loose_ok = True
    names = []
    check_only = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--out", "--traces", "-j", "--tar") and i + 1 < len(args):
            if a == "--out":
                out = args[i + 1]
            elif a == "--tar":
                tar = args[i + 1]
            elif a == "--traces":
                tdir = args[i + 1]
            else:
                jobs = max(1, int(args[i + 1]))
            i += 2
            continue
        if a == "--check":
            check_only = True
        elif a in ("-h", "--help") or a.startswith("-"):
            print(__doc__)
            return 0 if a in ("-h", "--help") else 2
        else:
            names.append(a[:-len(".trace")] if a.endswith(".trace") else a)
        i += 1
    if out is None:
        if os.environ.get("OUT"):
            out = os.path.join(os.environ["OUT"], "torch-traces")
            tar = tar or os.path.join(os.environ["OUT"], "torch-traces.tgz")
            loose_ok = False
        else:
            out = "torch-traces"

    traces = sorted(f for f in os.listdir(tdir) if f.endswith(".trace"))
    if names:
        traces = [t for t in traces if t[:-len(".trace")] in names]
        missing = set(names) - {t[:-len(".trace")] for t in traces}
        if missing:
            print("ERROR no such trace(s) in %s: %s" % (tdir, " ".join(sorted(missing))))
            return 2
    if not traces:
        print("ERROR no .trace files in %s" % tdir)
        return 2

    # Parse everything first: a malformed trace fails here, before any GPU time.
    bad = 0
    for t in traces:
        try:
            with open(os.path.join(tdir, t)) as fh:
                ops = parse_trace(fh.read())
            if check_only:
                kinds = {}
                for op in ops:
                    kinds[op[0]] = kinds.get(op[0], 0) + 1
                print("parsed %-28s %s" % (t, " ".join("%s=%d" % kv for kv in sorted(kinds.items()))))
        except (OSError, TraceError) as e:
            print("ERROR %s: %s" % (t, e))
            bad += 1
    if bad or check_only:
        return 1 if bad else 0

    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    pending = list(traces)
    running = []  # (name, Popen, start, logfile)
    results = {}
    while pending or running:
        while pending and len(running) < jobs:
            t = pending.pop(0)
            name = t[:-len(".trace")]
            env = dict(os.environ)
            # PYTORCH_ALLOC_CONF would win over PYTORCH_CUDA_ALLOC_CONF in torch 2.11
            for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
                      "TCUDA_ALLOC_CONF"):
                env.pop(k, None)
            cfg = os.path.join(tdir, name + ".config")
            if os.path.exists(cfg):
                with open(cfg) as fh:
                    env["PYTORCH_CUDA_ALLOC_CONF"] = fh.read().strip()
            env["PYTHONUNBUFFERED"] = "1"
            log = open(os.path.join(out, name + ".log.tmp"), "w+")
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                  os.path.join(tdir, t), out], stdout=log, stderr=subprocess.STDOUT, env=env)
            running.append((name, p, time.time(), log))
        time.sleep(0.05)
        still = []
        for name, p, st, log in running:
            rc = p.poll()
            if rc is None and time.time() - st > TRACE_TIMEOUT:
                p.kill()
                rc = p.wait()
                log.write("\nkilled after %ds\n" % TRACE_TIMEOUT)
            if rc is None:
                still.append((name, p, st, log))
                continue
            log.seek(0)
            text = log.read()
            log.close()
            os.remove(log.name)
            results[name] = rc
            if rc == 0:
                print(text.strip().splitlines()[-1] if text.strip() else "ok %s" % name)
            else:
                tail = "\n    ".join(text.strip().splitlines()[-15:])
                print("FAILED %s (exit %d):\n    %s" % (name, rc, tail))
                # no partial recordings: a failed trace leaves nothing behind
                for ext in (".expected.json", ".addresses", ".maps", ".segtrace", ".meta.json"):
                    try:
                        os.remove(os.path.join(out, name + ext))
                    except OSError:
                        pass
            sys.stdout.flush()
        running = still
    ok = sum(1 for rc in results.values() if rc == 0)
    print("recorded %d/%d traces into %s in %.1fs" % (ok, len(traces), out, time.time() - t0))
    if tar:
        import shutil
        import tarfile
        with tarfile.open(tar, "w:gz") as tf:
            tf.add(out, arcname=os.path.basename(os.path.normpath(out)))
        print("packed %s into %s" % (out, tar))
        if not loose_ok:
            shutil.rmtree(out, ignore_errors=True)
    return 0 if ok == len(traces) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
