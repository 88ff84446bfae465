#!/usr/bin/env python3
"""Compare two replay outputs (JSON arrays of {"stats", "segments"} per
checkpoint), e.g. `tcuda replay` against a recording from real PyTorch.

  compare_replay.py GOT EXPECTED            exit 0 if equal, else print the
                                            first difference and exit 1
  compare_replay.py --count GOT EXPECTED    print "M/N checkpoints match"
                                            and exit 0
  --stats-only                              ignore segments
  --placement-free                          compare only the stats that follow
                                            from the requests alone, not from
                                            where segments landed: the allocation
                                            and active block counts and the
                                            requested bytes (implies --stats-only).
                                            Allocated bytes count whole blocks,
                                            and whether a free block was split
                                            depends on which one was found, so
                                            they are placement-dependent
  --relative                                shift GOT's addresses by one constant
                                            (the difference of the highest segment
                                            at the first checkpoint with any: the
                                            driver's first chunk), for address
                                            models that agree up to the base
"""
import json
import sys

SEG_KEYS = ("address", "total_size", "allocated_size", "active_size", "requested_size",
            "stream", "segment_type", "is_expandable")
BLOCK_KEYS = ("address", "size", "requested_size", "state")


PLACEMENT_FREE = ("allocation.", "active.", "requested_bytes.")


def first_diff(got, exp, stats_only, placement_free=False):
    """None if the checkpoints agree, else a one-line description."""
    gs, es = got.get("stats", {}), exp.get("stats", {})
    if placement_free:
        gs = {k: v for k, v in gs.items() if k.startswith(PLACEMENT_FREE)}
        es = {k: v for k, v in es.items() if k.startswith(PLACEMENT_FREE)}
        if not es:
            return "no placement-free stats keys in the expected file"
    for k in sorted(set(gs) | set(es)):
        if k not in gs:
            return f"stats key {k} missing (expected {es[k]})"
        if k not in es:
            return f"stats key {k} unexpected (got {gs[k]})"
        if gs[k] != es[k]:
            return f"stats {k}: got {gs[k]}, expected {es[k]}"
    if stats_only:
        return None
    gseg = sorted(got.get("segments", []), key=lambda s: s["address"])
    eseg = sorted(exp.get("segments", []), key=lambda s: s["address"])
    for i, (g, e) in enumerate(zip(gseg, eseg)):
        for k in SEG_KEYS:
            if g.get(k) != e.get(k):
                return f"segment {i} (expected address {e.get('address')}): {k}: got {g.get(k)}, expected {e.get(k)}"
        gb, eb = g.get("blocks", []), e.get("blocks", [])
        for j, (x, y) in enumerate(zip(gb, eb)):
            for k in BLOCK_KEYS:
                if x.get(k) != y.get(k):
                    return (f"segment {i} (address {e.get('address')}) block {j}: {k}: "
                            f"got {x.get(k)}, expected {y.get(k)}")
        if len(gb) != len(eb):
            return f"segment {i} (address {e.get('address')}): {len(gb)} blocks, expected {len(eb)}"
    if len(gseg) != len(eseg):
        return f"{len(gseg)} segments, expected {len(eseg)}"
    return None


def shift_addresses(cps, delta):
    for c in cps:
        for g in c.get("segments", []):
            g["address"] += delta
            for b in g.get("blocks", []):
                b["address"] += delta


def first_address(cps):
    for c in cps:
        if c.get("segments"):
            return max(g["address"] for g in c["segments"])
    return None


def main(argv):
    count = "--count" in argv
    placement_free = "--placement-free" in argv
    stats_only = "--stats-only" in argv or placement_free
    relative = "--relative" in argv
    files = [a for a in argv[1:] if not a.startswith("--")]
    if len(files) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(files[0]) as f:
        got = json.load(f)
    with open(files[1]) as f:
        exp = json.load(f)
    if relative:
        a, b = first_address(got), first_address(exp)
        if a is not None and b is not None:
            shift_addresses(got, b - a)
    n = max(len(got), len(exp))
    if count:
        ok = sum(1 for g, e in zip(got, exp) if first_diff(g, e, stats_only, placement_free) is None)
        print(f"{ok}/{n} checkpoints match")
        return 0
    for i, (g, e) in enumerate(zip(got, exp)):
        d = first_diff(g, e, stats_only, placement_free)
        if d:
            print(f"checkpoint {i}: {d}")
            return 1
    if len(got) != len(exp):
        print(f"{len(got)} checkpoints, expected {len(exp)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
