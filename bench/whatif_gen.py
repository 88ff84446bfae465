#!/usr/bin/env python3
"""Generate a long, consistent PyTorch memory-snapshot history for bench_whatif.

Usage: bench/whatif_gen.py OUT.pickle [--entries N] [--seed S] [--layers L]

Writes what torch.cuda.memory._dump_snapshot() writes (pickle protocol 4 of
the dict {'segments', 'device_traces', 'allocator_settings',
'external_annotations'}, with torch 2.11's default allocator_settings) for
one device, at least N trace entries long (default 1,000,000; the last
step ends a few thousand past N), with no stack frames. Same seed, same
file. Nothing here needs torch or a GPU.

The program it describes: a decoder-only transformer (L layers of width
2048, 16 heads, vocabulary 32000, bf16, batch 8) trained with Adam:

  * parameters allocated once at the start (weights, biases, layer norms,
    embedding and head);
  * then steps until the history is N entries long. Each step draws its
    sequence length (256 to 2048 in steps of 128), so activation sizes
    change from step to step:
      - the batch's token ids and labels on a side stream (the loader's);
      - forward, layer by layer: activations kept for backward (layer norm
        outputs and statistics, qkv, attention output and log-sum-exp,
        residuals, MLP up and activation, an occasional dropout mask) and
        temporaries freed at once (projections before the residual add,
        small scalars), then the logits, their float32 copy (freed) and the
        log-softmax kept for the loss;
      - backward in reverse: gradients of activations allocated as the
        activations they replace are freed (LIFO-ish), parameter gradients
        allocated at their first use in the step (zero_grad(set_to_none)),
        interleaved with those frees;
      - gradient clipping: a small norm per parameter, stacked, then freed;
      - Adam (foreach): float32 exp_avg and exp_avg_sq made at the first
        step and kept, then each step small bias-correction scalars and a
        float32 sqrt temporary per parameter, all made, then all freed in
        order (FIFO);
      - zero_grad(set_to_none) frees every gradient; the batch is freed;
      - every tenth step a few metric scalars on the side stream;
  * a 'snapshot' entry every 25 steps (size: allocated bytes, as torch's);
  * at the end the parameters and optimizer state are still live, as in a
    snapshot dumped during training: the final 'segments' list holds them.

Addresses come from a small model of torch's caching allocator under the
default config: 512-byte rounding, small (<= 1 MiB) and large pools per
stream, best fit on (stream, size, address), 2 MiB / 20 MiB / rounded
segments, torch's split rule, coalescing on free, never an empty_cache.
Segments get ascending addresses, as a fresh process's cudaMalloc gives. So
every 'alloc' address is a block of a live segment, every free names a live
allocation (free_requested, then free_completed at once), the
'segment_alloc' entries are the ones torch would have made, and 'segments'
is the allocator's state at the end; the replay under the recorded config
follows the recorded segments without diverging.

Each entry is a fresh dict with a fresh 'N/A' string and a fresh empty
frames list, as torch builds them, so the pickle's memo traffic is that of
a real snapshot.
"""
import argparse
import bisect
import pickle
import random
import sys

K_MIN_BLOCK = 512
K_SMALL = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20

MAIN = 0
SIDE = 94472081453616  # a cudaStream_t value, as torch records it

def default_settings():
    """torch 2.11's allocator_settings under an empty PYTORCH_CUDA_ALLOC_CONF."""
    return {
        "PYTORCH_CUDA_ALLOC_CONF": "",
        "max_split_size": -1,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "graph_capture_record_stream_reuse": False,
        "roundup_power2_divisions": {str(1 << k): 0 for k in range(16)},
    }


def na():
    return "".join(("N/", "A"))  # a new str each time, as torch's entries have


class Seg:
    __slots__ = ("addr", "size", "stream", "small")

    def __init__(self, addr, size, stream, small):
        self.addr, self.size, self.stream, self.small = addr, size, stream, small


class Block:
    __slots__ = ("addr", "size", "seg", "allocated", "requested")

    def __init__(self, addr, size, seg):
        self.addr, self.size, self.seg = addr, size, seg
        self.allocated = False
        self.requested = 0


class Allocator:
    """torch's caching allocator under the default config, enough to place blocks."""

    def __init__(self, out, clock):
        self.out = out
        self.clock = clock
        self.free = {True: [], False: []}  # small? -> sorted [(stream, size, addr)]
        self.blocks = {}  # addr -> Block
        self.by_end = {}  # end address -> Block
        self.segs = []
        self.va = 0x7F3A00000000
        self.allocated = 0

    def entry(self, action, addr, size, stream):
        self.out.append({"action": action, "addr": addr, "size": size, "stream": stream,
                         "time_us": self.clock(), "compile_context": na(), "user_metadata": "",
                         "frames": []})

    def malloc(self, req, stream=MAIN):
        size = K_MIN_BLOCK if req < K_MIN_BLOCK else (req + K_MIN_BLOCK - 1) // K_MIN_BLOCK * K_MIN_BLOCK
        small = size <= K_SMALL
        pool = self.free[small]
        i = bisect.bisect_left(pool, (stream, size, 0))
        if i < len(pool) and pool[i][0] == stream:
            b = self.blocks[pool.pop(i)[2]]
        else:
            if small:
                seg_size = K_SMALL_BUFFER
            elif size < K_MIN_LARGE_ALLOC:
                seg_size = K_LARGE_BUFFER
            else:
                seg_size = (size + K_ROUND_LARGE - 1) // K_ROUND_LARGE * K_ROUND_LARGE
            seg = Seg(self.va, seg_size, stream, small)
            self.va += seg_size
            self.segs.append(seg)
            self.entry("segment_alloc", seg.addr, seg_size, stream)
            b = Block(seg.addr, seg_size, seg)
            self.blocks[b.addr] = b
            self.by_end[b.addr + b.size] = b
        rest = b.size - size
        if (rest >= K_MIN_BLOCK) if small else (rest > K_SMALL):
            r = Block(b.addr + size, rest, b.seg)
            b.size = size
            self.blocks[r.addr] = r
            self.by_end[b.addr + size] = b
            self.by_end[r.addr + rest] = r
            bisect.insort(pool, (stream, rest, r.addr))
        b.allocated = True
        b.requested = req
        self.allocated += b.size
        self.entry("alloc", b.addr, req, stream)
        return b.addr

    def _unpool(self, b):
        pool = self.free[b.seg.small]
        key = (b.seg.stream, b.size, b.addr)
        i = bisect.bisect_left(pool, key)
        assert pool[i] == key
        del pool[i]

    def release(self, addr):
        b = self.blocks[addr]
        assert b.allocated, "free of a block that is not allocated"
        stream = b.seg.stream
        self.entry("free_requested", addr, b.requested, stream)
        self.entry("free_completed", addr, b.requested, stream)
        b.allocated = False
        self.allocated -= b.size
        seg = b.seg
        n = self.blocks.get(b.addr + b.size)
        if n is not None and n.seg is seg and not n.allocated:
            self._unpool(n)
            del self.blocks[n.addr]
            del self.by_end[b.addr + b.size]
            b.size += n.size
            self.by_end[b.addr + b.size] = b
        p = self.by_end.get(b.addr)
        if p is not None and p.seg is seg and not p.allocated:
            self._unpool(p)
            del self.blocks[b.addr]
            del self.by_end[p.addr + p.size]
            p.size += b.size
            self.by_end[p.addr + p.size] = p
            b = p
        bisect.insort(self.free[seg.small], (stream, b.size, b.addr))

    def snapshot_entry(self):
        self.entry("snapshot", 0, self.allocated, MAIN)

    def segments(self):
        """memory_snapshot()'s segments, by address."""
        out = []
        for seg in sorted(self.segs, key=lambda s: s.addr):
            blocks, at = [], seg.addr
            alloc = req = 0
            while at < seg.addr + seg.size:
                b = self.blocks[at]
                blocks.append({"address": b.addr, "size": b.size,
                               "requested_size": b.requested,
                               "state": "active_allocated" if b.allocated else "inactive", "frames": []})
                if b.allocated:
                    alloc += b.size
                    req += b.requested
                at += b.size
            out.append({"device": 0, "address": seg.addr, "total_size": seg.size, "allocated_size": alloc,
                        "active_size": alloc, "requested_size": req, "stream": seg.stream,
                        "segment_type": "small" if seg.small else "large", "segment_pool_id": (0, 0),
                        "is_expandable": False, "frames": [], "blocks": blocks})
        return out


class Clock:
    def __init__(self, rng):
        self.t = 1796100000000000 + rng.randrange(10 ** 9)
        self.rng = rng

    def __call__(self):
        self.t += self.rng.randint(1, 40)
        return self.t

    def idle(self, us):
        self.t += us


class Model:
    D, HEADS, VOCAB, BATCH = 2048, 16, 32000, 8
    BF16, F32 = 2, 4

    def __init__(self, layers, rng, a, clock):
        self.layers, self.rng, self.a, self.clock = layers, rng, a, clock
        d = self.D
        # (name, bytes) per parameter, in registration order
        self.params = [("wte", self.VOCAB * d * self.BF16)]
        for l in range(layers):
            for name, numel in (("ln1.w", d), ("ln1.b", d), ("qkv.w", 3 * d * d), ("qkv.b", 3 * d),
                                ("proj.w", d * d), ("proj.b", d), ("ln2.w", d), ("ln2.b", d),
                                ("up.w", 4 * d * d), ("up.b", 4 * d), ("down.w", 4 * d * d), ("down.b", d)):
                self.params.append(("h%d.%s" % (l, name), numel * self.BF16))
        self.params += [("lnf.w", d * self.BF16), ("lnf.b", d * self.BF16), ("head", self.VOCAB * d * self.BF16)]
        self.index = {name: i for i, (name, _) in enumerate(self.params)}
        self.weights = [a.malloc(size) for _, size in self.params]
        self.exp_avg = self.exp_avg_sq = self.steps = None
        self.grads = {}
        self.step_no = 0

    def grad(self, name):
        """A parameter's gradient, made at its first use in the step."""
        i = self.index[name]
        if i not in self.grads:
            self.grads[i] = self.a.malloc(self.params[i][1])

    def step(self):
        a, rng, d = self.a, self.rng, self.D
        seq = rng.randrange(256, 2049, 128)
        T = self.BATCH * seq
        act = T * d * self.BF16
        ids = a.malloc(T * 8, SIDE)
        labels = a.malloc(T * 8, SIDE)
        self.clock.idle(rng.randint(500, 3000))
        # forward
        x = a.malloc(act)  # embedding output
        saved = []
        for l in range(self.layers):
            ln1 = a.malloc(act)
            st1 = (a.malloc(T * self.F32), a.malloc(T * self.F32))
            qkv = a.malloc(3 * act)
            out = a.malloc(act)
            lse = a.malloc(self.BATCH * self.HEADS * seq * self.F32)
            mask = a.malloc(T * d) if rng.random() < 0.25 else None
            proj = a.malloc(act)
            x1 = a.malloc(act)
            a.release(proj)
            if rng.random() < 0.3:  # a scalar temporary (a loss scale, a flag)
                a.release(a.malloc(4))
            ln2 = a.malloc(act)
            st2 = (a.malloc(T * self.F32), a.malloc(T * self.F32))
            up = a.malloc(4 * act)
            gelu = a.malloc(4 * act)
            down = a.malloc(act)
            x2 = a.malloc(act)
            a.release(down)
            saved.append((x, ln1, st1, qkv, out, lse, mask, x1, ln2, st2, up, gelu))
            x = x2
        lnf = a.malloc(act)
        stf = (a.malloc(T * self.F32), a.malloc(T * self.F32))
        logits = a.malloc(T * self.VOCAB * self.BF16)
        upcast = a.malloc(T * self.VOCAB * self.F32)
        a.release(logits)
        logp = a.malloc(T * self.VOCAB * self.F32)
        a.release(upcast)
        loss = a.malloc(4)
        self.clock.idle(rng.randint(2000, 20000))
        # backward
        g = a.malloc(T * self.VOCAB * self.F32)
        a.release(logp)
        gl = a.malloc(T * self.VOCAB * self.BF16)
        a.release(g)
        self.grad("head")
        gx = a.malloc(act)
        a.release(gl)
        self.grad("lnf.w")
        self.grad("lnf.b")
        gx2 = a.malloc(act)
        a.release(gx)
        for s in stf:
            a.release(s)
        a.release(lnf)
        for l in reversed(range(self.layers)):
            xin, ln1, st1, qkv, out, lse, mask, x1, ln2, st2, up, gelu = saved[l]
            p = "h%d." % l
            g_act = a.malloc(4 * act)
            self.grad(p + "down.w")
            self.grad(p + "down.b")
            a.release(gelu)
            g_up = a.malloc(4 * act)
            a.release(g_act)
            a.release(up)
            g_ln2 = a.malloc(act)
            self.grad(p + "up.w")
            self.grad(p + "up.b")
            a.release(g_up)
            g_x1 = a.malloc(act)
            self.grad(p + "ln2.w")
            self.grad(p + "ln2.b")
            a.release(g_ln2)
            a.release(ln2)
            for s in st2:
                a.release(s)
            a.release(gx2)
            a.release(x)  # this layer's output (x2)
            g_out = a.malloc(act)
            self.grad(p + "proj.w")
            self.grad(p + "proj.b")
            g_qkv = a.malloc(3 * act)
            a.release(g_out)
            if mask is not None:
                a.release(mask)
            a.release(out)
            a.release(lse)
            g_ln1 = a.malloc(act)
            self.grad(p + "qkv.w")
            self.grad(p + "qkv.b")
            a.release(g_qkv)
            a.release(qkv)
            gx2 = a.malloc(act)
            self.grad(p + "ln1.w")
            self.grad(p + "ln1.b")
            a.release(g_ln1)
            a.release(ln1)
            for s in st1:
                a.release(s)
            a.release(g_x1)
            a.release(x1)
            x = xin
        self.grad("wte")
        a.release(gx2)
        a.release(x)  # the embedding output
        a.release(loss)
        self.clock.idle(rng.randint(2000, 20000))
        # gradient clipping: foreach norm, stack, total, clip coefficient
        norms = [a.malloc(4) for _ in self.grads]
        stacked = a.malloc(4 * len(norms))
        total = a.malloc(4)
        for n in norms:
            a.release(n)
        a.release(stacked)
        coef = a.malloc(4)
        a.release(total)
        a.release(coef)
        # Adam, foreach
        if self.exp_avg is None:
            self.steps = [a.malloc(4) for _ in self.params]
            self.exp_avg = [a.malloc(size * 2) for _, size in self.params]
            self.exp_avg_sq = [a.malloc(size * 2) for _, size in self.params]
        bc1 = [a.malloc(4) for _ in self.params]
        bc2 = [a.malloc(4) for _ in self.params]
        sqrt = [a.malloc(size * 2) for _, size in self.params]
        for t in bc1 + bc2 + sqrt:
            a.release(t)
        # zero_grad(set_to_none=True), the batch
        for i in sorted(self.grads):
            a.release(self.grads[i])
        self.grads = {}
        a.release(ids)
        a.release(labels)
        self.step_no += 1
        if self.step_no % 10 == 0:
            m = [a.malloc(rng.choice((4, 8, 512, 4096)), SIDE) for _ in range(rng.randint(3, 8))]
            for t in m:
                a.release(t)
        if self.step_no % 25 == 0:
            a.snapshot_entry()
        self.clock.idle(rng.randint(1000, 5000))


def generate(entries, seed, layers):
    rng = random.Random(seed)
    out = []
    clock = Clock(rng)
    a = Allocator(out, clock)
    m = Model(layers, rng, a, clock)
    while len(out) < entries:
        m.step()
    a.snapshot_entry()
    return {
        "segments": a.segments(),
        "device_traces": [out],
        "allocator_settings": default_settings(),
        "external_annotations": [],
    }, m.step_no


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--entries", type=int, default=1000000, help="at least this many trace entries (default 1000000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int, default=24, help="transformer layers (default 24)")
    args = ap.parse_args(argv)
    if args.entries < 1 or args.layers < 1:
        ap.error("--entries and --layers must be positive")
    snap, steps = generate(args.entries, args.seed, args.layers)
    with open(args.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    tr = snap["device_traces"][0]
    print("%s: %d entries, %d steps, %d segments" % (args.out, len(tr), steps, len(snap["segments"])))


if __name__ == "__main__":
    main(sys.argv[1:])
