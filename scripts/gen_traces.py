#!/usr/bin/env python3
"""Write the allocator traces that PyTorch's ground truth is recorded for.

Usage: scripts/gen_traces.py [OUTDIR]     (default: tests/data/torch)

Deterministic: the same files on every run and Python version (own PRNG,
no dict-order or float-format dependence). Each trace is <name>.trace, and
<name>.config holds a PYTORCH_CUDA_ALLOC_CONF string when the trace needs one.

Trace format (one op per line, '#' starts a comment):
  a ID SIZE [STREAM]  allocate SIZE bytes as handle ID on stream STREAM
                      (0 = default stream, k > 0 = k-th side stream, created
                      on first use)
  f ID                free handle ID
  c                   checkpoint: record memory_stats() and the snapshot
  e                   empty_cache()
  r                   reset_peak_memory_stats()
scripts/record_torch_traces.py replays them in PyTorch on the GPU machine.
"""
import os
import sys

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
M64 = (1 << 64) - 1

# Live bytes a trace may hold at once; the H200 has ~141 GB, and fragmentation
# can reserve a few times what is live.
LIVE_CAP = 12 * GiB


class Rng:
    """splitmix64: fixed output whatever the Python version."""

    def __init__(self, seed):
        self.s = seed & M64

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        return self.u64() % n

    def range(self, lo, hi):  # inclusive
        return lo + self.below(hi - lo + 1)

    def chance(self, num, den):
        return self.below(den) < num

    def loguniform(self, lo, hi):
        """Integer in [lo, hi], log-uniform, in integer arithmetic only:
        pick a power-of-two octave, then a uniform size inside it."""
        lo_b, hi_b = lo.bit_length(), hi.bit_length()
        b = self.range(lo_b, hi_b)
        a = max(lo, 1 << (b - 1))
        z = min(hi, (1 << b) - 1)
        if a > z:
            return lo
        return self.range(a, z)

    def pick(self, seq):
        return seq[self.below(len(seq))]


class Trace:
    def __init__(self, name, desc, config=None, ckpt_every=100):
        self.name, self.config = name, config
        self.lines = ["# %s" % name]
        for d in desc.strip().splitlines():
            self.lines.append("# " + d.strip())
        if config:
            self.lines.append("# PYTORCH_CUDA_ALLOC_CONF=%s (from %s.config)" % (config, name))
        self.next_id = 1
        self.live = {}      # id -> size, in allocation order
        self.live_bytes = 0
        self.nops = 0
        self.since = 0
        self.every = ckpt_every

    def _op(self, text):
        self.lines.append(text)
        self.nops += 1
        self.since += 1
        if self.since >= self.every:
            self.c()

    def a(self, size, stream=0):
        assert size >= 1
        i = self.next_id
        self.next_id += 1
        self.live[i] = size
        self.live_bytes += size
        assert self.live_bytes <= LIVE_CAP, (self.name, self.live_bytes)
        self._op("a %d %d %d" % (i, size, stream) if stream else "a %d %d" % (i, size))
        return i

    def f(self, i):
        self.live_bytes -= self.live.pop(i)
        self._op("f %d" % i)

    def c(self):
        self.lines.append("c")
        self.since = 0

    def e(self):
        self._op("e")

    def r(self):
        self._op("r")

    def comment(self, text):
        self.lines.append("# " + text)

    def free_random(self, rng):
        ids = list(self.live)
        self.f(ids[rng.below(len(ids))])

    def free_all(self, rng=None):
        ids = list(self.live)
        if rng:  # a shuffled order, deterministically
            for k in range(len(ids) - 1, 0, -1):
                j = rng.below(k + 1)
                ids[k], ids[j] = ids[j], ids[k]
        for i in ids:
            self.f(i)

    def finish(self, rng=None):
        """Free what is left, then look at the cache before and after emptying it."""
        self.comment("end: free everything, checkpoint, empty_cache, checkpoint")
        self.free_all(rng)
        self.c()
        self.e()
        self.c()

    def write(self, outdir):
        with open(os.path.join(outdir, self.name + ".trace"), "w", newline="\n") as fh:
            fh.write("\n".join(self.lines) + "\n")
        cfg = os.path.join(outdir, self.name + ".config")
        if self.config:
            with open(cfg, "w", newline="\n") as fh:
                fh.write(self.config + "\n")
        elif os.path.exists(cfg):
            os.remove(cfg)


def churn(t, rng, nops, sizer, live_target, streams=(0,), cap=None):
    """Random alloc/free around live_target live blocks."""
    cap = cap or LIVE_CAP // 2
    start = t.nops
    while t.nops - start < nops:
        n = len(t.live)
        p_alloc = 75 if n < live_target // 2 else 50 if n < live_target else 25
        if n == 0 or (rng.below(100) < p_alloc):
            size = sizer(rng)
            while t.live and t.live_bytes + size > cap:
                t.free_random(rng)
            t.a(size, rng.pick(streams))
        else:
            t.free_random(rng)


def small_size(rng):
    k = rng.below(10)
    if k < 4:
        return rng.range(1, 4096)
    if k < 6:
        return rng.pick([512, 1024, 4096, 8192, 65536, MiB]) + rng.range(-1, 1)
    return rng.loguniform(1, MiB)


def mixed_size(rng):
    k = rng.below(10)
    if k < 3:
        return small_size(rng)
    if k < 7:
        return rng.loguniform(MiB + 1, 10 * MiB)
    return rng.loguniform(10 * MiB, 200 * MiB)


# ---------------------------------------------------------------- traces
def t_boundary_sizes():
    t = Trace("boundary_sizes", """
        Sizes at every rounding and pool boundary: 512-byte rounding, the
        1 MiB small/large split, 2 MiB small segments, 10 MiB (20 MiB
        segment vs own segment), 20 MiB, and their neighbours.""")
    rng = Rng(101)
    base = [1, 2, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 65535, 65536, 65537,
            MiB - 513, MiB - 512, MiB - 511, MiB - 1, MiB, MiB + 1, MiB + 511, MiB + 512, MiB + 513,
            2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 3 * MiB, 10 * MiB - 513, 10 * MiB - 1, 10 * MiB,
            10 * MiB + 1, 12 * MiB, 18 * MiB + 1, 20 * MiB - 1, 20 * MiB, 20 * MiB + 1,
            22 * MiB - 1, 22 * MiB + 1, 40 * MiB + 1, 64 * MiB - 1]
    ids = [t.a(s) for s in base]
    t.c()
    t.comment("free every other block, then reuse the holes with the same sizes reversed")
    for i in ids[::2]:
        t.f(i)
    t.c()
    ids2 = [t.a(s) for s in reversed(base[::2])]
    t.c()
    for i in ids[1::2] + ids2:
        t.f(i)
    t.c()
    t.comment("each boundary size alone: allocate, free, allocate +1, free")
    for s in base:
        a = t.a(s)
        b = t.a(s + 1)
        t.f(a)
        c = t.a(max(1, s - 1))
        t.f(b)
        t.f(c)
    t.c()
    t.comment("random order over the boundary sizes with a live set")
    churn(t, rng, 800, lambda r: r.pick(base), 40)
    t.finish(rng)
    return t


def t_small_churn():
    t = Trace("small_churn", """
        Small pool only (<= 1 MiB): many blocks packed into 2 MiB segments,
        random frees, splits and merges.""")
    rng = Rng(202)
    churn(t, rng, 1400, small_size, 300)
    t.comment("drain to a few blocks, then regrow")
    while len(t.live) > 20:
        t.free_random(rng)
    t.c()
    churn(t, rng, 1200, small_size, 150)
    t.finish(rng)
    return t


def t_large_mixed():
    t = Trace("large_mixed", """
        Small, 1-10 MiB (20 MiB segments) and 10-200 MiB requests mixed,
        around 60 live blocks.""")
    rng = Rng(303)
    churn(t, rng, 2200, mixed_size, 60)
    t.finish(rng)
    return t


def t_fragmentation():
    t = Trace("fragmentation", """
        Patterns that fragment a caching allocator: holes that the next,
        slightly larger request cannot use; long-lived small blocks pinning
        split segments; and a loop whose activation sizes change every step.""")
    rng = Rng(404)
    t.comment("sizes grow each round; every other block of a round stays live")
    keep = []
    for rnd in range(8):
        size = 6 * MiB + rnd * 700 * KiB + 123
        ids = [t.a(size) for _ in range(10)]
        for k, i in enumerate(ids):
            if k % 2:
                t.f(i)
            else:
                keep.append(i)
        if rnd % 3 == 2:
            for i in keep[: len(keep) // 2]:
                t.f(i)
            keep = keep[len(keep) // 2:]
    t.comment("small long-lived blocks between large short-lived ones (large pool split)")
    pins = []
    for k in range(40):
        big = t.a(rng.range(2 * MiB, 9 * MiB))
        pins.append(t.a(rng.range(MiB + 1, MiB + 200 * KiB)))
        t.f(big)
    for i in keep:
        t.f(i)
    t.comment("a training-like loop with a different sequence length each step")
    for step in range(14):
        L = 64 + rng.below(961)
        acts = []
        for layer in range(4):
            acts.append(t.a(L * 4096 * 2))
            tmp = t.a(L * L * 2 * 4)
            acts.append(t.a(L * 4096 * 2))
            t.f(tmp)
            acts.append(t.a(L * 16384 * 2))
            acts.append(t.a(rng.range(512, 8192)))
        for i in reversed(acts):
            g = t.a(rng.range(1024, 2 * MiB))
            t.f(i)
            t.f(g)
    for i in pins:
        t.f(i)
    t.finish(rng)
    return t


def t_multi_stream3():
    t = Trace("multi_stream3", """
        Three streams (default and two side streams) with the same size mix,
        so equal-size free blocks exist on several streams; blocks are never
        shared across streams.""")
    rng = Rng(505)
    churn(t, rng, 1800, mixed_size, 60, streams=(0, 1, 2))
    t.e()
    t.c()
    churn(t, rng, 600, small_size, 100, streams=(0, 1, 2))
    t.finish(rng)
    return t


def t_multi_stream2_first_side():
    t = Trace("multi_stream2_first_side", """
        Two streams; the very first allocation is on the side stream, so the
        stream exists before the first cudaMalloc (the driver then lays out
        memory differently).""")
    rng = Rng(606)
    t.a(4096, 1)
    churn(t, rng, 1200, lambda r: small_size(r) if r.chance(1, 2) else r.loguniform(MiB + 1, 30 * MiB),
          80, streams=(1, 0))
    t.finish(rng)
    return t


def oversize_size(split_mib):
    def sizer(rng):
        k = rng.below(10)
        if k < 2:
            return small_size(rng)
        if k < 5:
            return rng.loguniform(MiB + 1, split_mib * MiB - 1)
        if k < 6:
            return split_mib * MiB + rng.range(-1, 1)
        return rng.loguniform(split_mib * MiB, 6 * split_mib * MiB)
    return sizer


def t_oversize_msplit64():
    t = Trace("oversize_msplit64", """
        max_split_size_mb:64: blocks of 64 MiB and more are never split and
        are reused only by requests within max_non_split_rounding (20 MiB);
        oversize stats; release of cached oversize blocks.""", config="max_split_size_mb:64")
    rng = Rng(707)
    churn(t, rng, 800, oversize_size(64), 30)
    t.e()
    t.c()
    churn(t, rng, 700, oversize_size(64), 30)
    t.finish(rng)
    return t


def t_oversize_msplit20():
    t = Trace("oversize_msplit20", """
        max_split_size_mb:20, the smallest allowed: every 20 MiB segment is
        itself oversize, so 1-10 MiB requests are not split from them.""",
        config="max_split_size_mb:20")
    rng = Rng(808)

    def sizer(r):
        k = r.below(10)
        if k < 3:
            return small_size(r)
        if k < 6:
            return r.loguniform(MiB + 1, 10 * MiB)
        if k < 7:
            return 20 * MiB + r.range(-1, 1)
        return r.loguniform(10 * MiB, 80 * MiB)

    churn(t, rng, 1400, sizer, 40)
    t.finish(rng)
    return t


def roundup_size(rng):
    k = rng.below(10)
    if k < 3:
        return small_size(rng)
    if k < 8:
        return rng.loguniform(MiB, 300 * MiB)
    return rng.loguniform(300 * MiB, 1536 * MiB)


def t_roundup4():
    t = Trace("roundup4", """
        roundup_power2_divisions:4: sizes above 2 KiB round up to a quarter
        of their power-of-two interval.""", config="roundup_power2_divisions:4")
    rng = Rng(909)
    churn(t, rng, 1200, roundup_size, 24, cap=8 * GiB)
    t.finish(rng)
    return t


def t_roundup_list():
    t = Trace("roundup_list", """
        roundup_power2_divisions:[256:4,>:1]: 4 divisions up to the 256 MiB
        slot (256-512 MiB), plain 512-byte rounding above.""",
        config="roundup_power2_divisions:[256:4,>:1]")
    rng = Rng(1010)
    churn(t, rng, 1200, roundup_size, 24, cap=8 * GiB)
    t.finish(rng)
    return t


def t_roundup_list2():
    t = Trace("roundup_list2", """
        roundup_power2_divisions:[1:2,64:8,>:16]: different divisions per
        size slot, with the first key filling the lower slots and '>' the
        slots after the last key.""", config="roundup_power2_divisions:[1:2,64:8,>:16]")
    rng = Rng(1111)
    churn(t, rng, 1000, roundup_size, 24, cap=8 * GiB)
    t.finish(rng)
    return t


def t_msplit_roundup():
    t = Trace("msplit_roundup", """
        max_split_size_mb:128 together with roundup_power2_divisions:4.""",
        config="max_split_size_mb:128,roundup_power2_divisions:4")
    rng = Rng(1212)
    churn(t, rng, 1200, oversize_size(128), 24, cap=8 * GiB)
    t.finish(rng)
    return t


def t_expandable():
    t = Trace("expandable", """
        expandable_segments:True: one growing segment per stream and pool;
        pages mapped as needed.""", config="expandable_segments:True")
    rng = Rng(1313)
    churn(t, rng, 2000, mixed_size, 60)
    t.finish(rng)
    return t


def t_expandable_multistream():
    t = Trace("expandable_multistream", """
        expandable_segments:True on two streams, with empty_cache while
        blocks are live (free pages inside the segments get unmapped).""",
        config="expandable_segments:True")
    rng = Rng(1414)
    churn(t, rng, 700, mixed_size, 50, streams=(0, 1))
    t.e()
    t.c()
    churn(t, rng, 700, mixed_size, 50, streams=(0, 1))
    t.e()
    t.c()
    t.finish(rng)
    return t


def t_expandable_growth():
    t = Trace("expandable_growth", """
        expandable_segments:True with a tensor that grows each step: the
        free mapped tail is extended by only the shortfall.""",
        config="expandable_segments:True")
    rng = Rng(1515)
    keep = t.a(3 * MiB)
    cur = None
    for step in range(60):
        size = 4 * MiB + step * 5 * MiB + rng.range(0, MiB)
        nxt = t.a(size)
        if cur:
            t.f(cur)
        cur = nxt
        if step % 7 == 6:
            s = t.a(rng.range(1, MiB))
            t.f(s)
        if step % 20 == 19:
            t.e()
            t.c()
    t.f(cur)
    t.f(keep)
    t.c()
    churn(t, rng, 600, mixed_size, 40)
    t.finish(rng)
    return t


def t_expandable_msplit():
    t = Trace("expandable_msplit", """
        expandable_segments:True with max_split_size_mb:64.""",
        config="expandable_segments:True,max_split_size_mb:64")
    rng = Rng(1616)
    churn(t, rng, 1200, oversize_size(64), 30)
    t.finish(rng)
    return t


def t_empty_cache_mid():
    t = Trace("empty_cache_mid", """
        empty_cache with blocks live: only unsplit free segments go back;
        then the cache refills.""")
    rng = Rng(1717)
    for rnd in range(6):
        churn(t, rng, 300, mixed_size, 50)
        t.c()
        t.e()
        t.c()
    t.finish(rng)
    return t


def t_reset_peak():
    t = Trace("reset_peak", """
        reset_peak_memory_stats at several points: peaks drop to current.""")
    rng = Rng(1818)
    for rnd in range(6):
        churn(t, rng, 250, mixed_size if rnd % 2 else small_size, 60)
        t.c()
        t.r()
        t.c()
        if rnd == 3:
            while len(t.live) > 5:
                t.free_random(rng)
            t.e()
            t.r()
            t.c()
    t.finish(rng)
    return t


def t_training_loop():
    t = Trace("training_loop", """
        A transformer-like training loop: long-lived parameters and optimizer
        state, activations kept through forward and freed in backward, a
        different sequence length each step.""")
    rng = Rng(1919)
    params = []
    for k in range(24):
        params.append(t.a(rng.loguniform(256 * KiB, 48 * MiB)))
        params.append(t.a(rng.range(4096, 65536)))
    for step in range(16):
        L = 128 + rng.below(897)
        acts = []
        for layer in range(6):
            acts.append(t.a(L * 2048 * 2))
            tmp = t.a(L * L * 2 * 8)
            acts.append(t.a(L * 2048 * 2))
            t.f(tmp)
            acts.append(t.a(L * 8192 * 2))
            acts.append(t.a(rng.range(512, 8192)))
        for i in reversed(acts):
            g = t.a(rng.range(1024, 2 * MiB))
            t.f(i)
            t.f(g)
        if step % 5 == 4:
            t.r()
    for i in params:
        t.f(i)
    t.finish(rng)
    return t


ALL = [t_boundary_sizes, t_small_churn, t_large_mixed, t_fragmentation, t_multi_stream3,
       t_multi_stream2_first_side, t_oversize_msplit64, t_oversize_msplit20, t_roundup4,
       t_roundup_list, t_roundup_list2, t_msplit_roundup, t_expandable, t_expandable_multistream,
       t_expandable_growth, t_expandable_msplit, t_empty_cache_mid, t_reset_peak, t_training_loop]


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = argv[1] if len(argv) > 1 else os.path.join(root, "tests", "data", "torch")
    os.makedirs(outdir, exist_ok=True)
    for make in ALL:
        t = make()
        t.write(outdir)
        n_c = sum(1 for l in t.lines if l == "c")
        print("%-28s %5d ops %3d checkpoints%s" % (t.name, t.nops, n_c,
                                                  "  config: " + t.config if t.config else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
