#!/usr/bin/env python3
"""Turn a PyTorch memory snapshot into a replay trace (tests/data/torch/README.md).

Usage: scripts/snapshot_to_trace.py SNAPSHOT [-o OUT.trace] [--device N]

SNAPSHOT is what torch.cuda.memory._dump_snapshot() writes (a pickle), or
the same document as JSON. The trace goes to OUT.trace, or stdout.

What the trace keeps of the device's history (device_traces[N]):
  - every `alloc` entry is `a ID SIZE [STREAM]`, SIZE the requested size;
  - the block is freed (`f ID`) at its `free_completed` entry, so a block
    kept alive by record_stream is freed when torch really freed it;
  - streams: 0 stays the default stream, the others are numbered 1, 2, ...
    in order of first use;
  - `oom` entries (requests torch refused) and segment_*, snapshot and
    free_requested entries are dropped; an empty_cache leaves no entry of
    its own.
When the history's start was lost (torch's ring buffer was full), the
blocks live before its first entry are allocated first: those freed
inside the window (a free with no alloc before it) and those still active
in the snapshot's segments at the end. Their allocation order is not
known, so peaks of such a trace are an approximation.

The output is deterministic: the same snapshot gives the same bytes.
Exit status 1, with a message naming the file, for an unreadable or
malformed snapshot.
"""
import argparse
import json
import pickle
import sys


class PlainUnpickler(pickle.Unpickler):
    """Snapshots hold plain data only; refuse anything that builds objects."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("refusing %s.%s: a snapshot holds plain data only" % (module, name))


class BadSnapshot(Exception):
    pass


def load(path):
    with open(path, "rb") as f:
        head = f.read(1)
        f.seek(0)
        if head in (b"{", b"[", b" ", b"\n"):
            return json.load(f)
        return PlainUnpickler(f).load()


def entry_int(e, key, i):
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadSnapshot("trace entry %d (%s): %r is not an integer" % (i, e.get("action"), key))
    return v


def convert(snap, device):
    if not isinstance(snap, dict) or not isinstance(snap.get("device_traces"), list):
        raise BadSnapshot("no device_traces list (not a memory snapshot)")
    traces = snap["device_traces"]
    if device >= len(traces):
        raise BadSnapshot("no history for device %d (%d devices)" % (device, len(traces)))
    entries = traces[device]
    if not isinstance(entries, list):
        raise BadSnapshot("device_traces[%d] is not a list" % device)

    next_id = [1]

    def new_id():
        i = next_id[0]
        next_id[0] += 1
        return i

    before = []  # (id, size, raw stream): live before the first entry
    ops = []     # ("a", id, size, raw stream) or ("f", id)
    live = {}    # addr -> id
    n_alloc = n_free = n_oom = n_repair = 0
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise BadSnapshot("trace entry %d is not a dict" % i)
        act = e.get("action")
        if act == "alloc":
            addr, size, stream = entry_int(e, "addr", i), entry_int(e, "size", i), entry_int(e, "stream", i)
            if size < 0:
                raise BadSnapshot("trace entry %d: negative size %d" % (i, size))
            if addr in live:  # its free was lost: free it here so the trace stays valid
                ops.append(("f", live.pop(addr)))
                n_repair += 1
            bid = new_id()
            live[addr] = bid
            ops.append(("a", bid, size, stream))
            n_alloc += 1
        elif act == "free_completed":
            addr = entry_int(e, "addr", i)
            if addr in live:
                ops.append(("f", live.pop(addr)))
            else:
                bid = new_id()
                before.append((bid, entry_int(e, "size", i), entry_int(e, "stream", i)))
                ops.append(("f", bid))
            n_free += 1
        elif act == "oom":
            n_oom += 1
    n_window_start = len(before)

    # Blocks active at the end that the history never allocated: they lived
    # through the whole (truncated) window.
    live_addrs = set(live)
    segs = snap.get("segments") or []
    tail = []
    for s in segs if isinstance(segs, list) else []:
        if not isinstance(s, dict) or s.get("device", device) != device:
            continue
        addr = s.get("address")
        if not isinstance(addr, int):
            continue
        stream = s.get("stream", 0)
        for b in s.get("blocks") or []:
            if not isinstance(b, dict) or not isinstance(b.get("size"), int):
                raise BadSnapshot("segment at %d: a block without an integer size" % s["address"])
            size = b.get("requested_size", b["size"])
            if str(b.get("state", "")).startswith("active") and addr not in live_addrs:
                if not isinstance(size, int) or not isinstance(stream, int):
                    raise BadSnapshot("segment at %d: block at %d has no integer size or stream" % (s["address"], addr))
                tail.append((addr, size, stream))
            addr += b["size"]
    for addr, size, stream in sorted(tail):
        before.append((new_id(), size, stream))

    out_ops = [("a", bid, size, stream) for bid, size, stream in before] + ops
    smap = {0: 0}
    lines = []
    for op in out_ops:
        if op[0] == "a":
            _, bid, size, stream = op
            if stream not in smap:
                smap[stream] = len(smap)
            k = smap[stream]
            lines.append("a %d %d %d" % (bid, size, k) if k else "a %d %d" % (bid, size))
        else:
            lines.append("f %d" % op[1])
    notes = {
        "allocs": n_alloc, "frees": n_free, "oom_skipped": n_oom,
        "live_before_history": len(before), "of_them_freed_in_window": n_window_start,
        "lost_frees_repaired": n_repair, "side_streams": len(smap) - 1,
    }
    return lines, notes


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv[1:])
    try:
        lines, notes = convert(load(a.snapshot), a.device)
    except (OSError, EOFError, ValueError, pickle.UnpicklingError, BadSnapshot, RecursionError,
            MemoryError, AttributeError, TypeError, IndexError, KeyError) as e:
        print("snapshot_to_trace: %s: %s" % (a.snapshot, e), file=sys.stderr)
        return 1
    name = a.snapshot.replace("\\", "/").rsplit("/", 1)[-1]
    text = "# converted from %s (device %d) by scripts/snapshot_to_trace.py\n" % (name, a.device)
    text += "# " + " ".join("%s=%d" % kv for kv in notes.items()) + "\n"
    text += "\n".join(lines) + ("\n" if lines else "")
    try:
        if a.output:
            with open(a.output, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    except OSError as e:
        print("snapshot_to_trace: %s: %s" % (a.output or "stdout", e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
