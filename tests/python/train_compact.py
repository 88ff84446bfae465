"""The compact policy (TCUDA_ALLOC_CONF=policy:compact) in a PyTorch training
loop, through torch's CUDAPluggableAllocator. The same loop runs three
times, each in a fresh process (the allocator must be installed before
torch's first CUDA allocation), with PYTORCH_CUDA_ALLOC_CONF,
PYTORCH_ALLOC_CONF and TCUDA_ALLOC_CONF removed from the environment:

  torch    torch's own allocator (default config)
  tcuda    tcuda, TCUDA_ALLOC_CONF unset: the torch-identical policy
  compact  tcuda, TCUDA_ALLOC_CONF=policy:compact

The requirement (docs/compact.md), checked by check():
  - compact's physical memory (cudaMemGetInfo) stays within
    max(1.10 x torch's peak allocated, torch's peak allocated + 4 MiB);
  - compact's losses are tcuda's (torch-identical policy) bit for bit;
  - compact's step time is at most 1.05 x torch's: measured and printed
    here, judged only by bench/train_compact_torch.py (a unit test is no
    benchmark).

The loop is a small decoder-only transformer whose batch size and sequence
length change every step, so the activation sizes vary and a caching
allocator fragments. Steps cycle through SHAPES; cycle 0 is a warm-up
(see run()).

Used by tests/gpu/train_compact.sh and bench/train_compact_torch.py.

    python3 train_compact.py [--cycles N]            # three runs, check (exit 1 on failure)
    python3 train_compact.py --mode torch|tcuda|compact [--cycles N]   # one run, JSON out
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
MODES = ("torch", "tcuda", "compact")
COMPACT_CONF = "policy:compact"
CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "TCUDA_ALLOC_CONF")
# (batch, sequence length) of each step of a cycle
SHAPES = ((16, 128), (8, 512), (24, 96), (12, 384), (16, 256), (6, 448), (20, 160), (10, 320))
VOCAB, D, HEADS, LAYERS, FF = 8192, 512, 8, 4, 2048


def bound(peak_allocated):
    """The compact policy's bound on physical memory for a peak allocated P."""
    return max(1.10 * peak_allocated, peak_allocated + 4 * MIB)


def build_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)

        def forward(self, x, mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
            # math attention: matmuls and softmax, deterministic by construction
            a = torch.softmax(q @ k.transpose(-1, -2) / (D // HEADS) ** 0.5 + mask, -1)
            a = F.dropout(a, 0.1, self.training) @ v
            x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, t, D)), 0.1, self.training)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(max(s for _, s in SHAPES), D)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln, self.out = nn.LayerNorm(D), nn.Linear(D, VOCAB)

        def forward(self, x):
            t = x.shape[1]
            mask = torch.full((t, t), float("-inf"), device=x.device).triu(1)
            h = self.emb(x) + self.pos(torch.arange(t, device=x.device))
            for blk in self.blocks:
                h = blk(h, mask)
            return self.out(self.ln(h))

    return Decoder()


def run(mode, cycles):
    """One run in this process; returns its figures as a dict."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    if mode != "torch":
        import tcuda
        # libtcuda reads its config at the first allocation, where torch
        # would only see a failed malloc: ask for it first, so that a
        # rejected config says so.
        conf = os.environ.get("TCUDA_ALLOC_CONF")
        try:
            settings = tcuda.get_allocator_settings()
        except tcuda.TcudaError as e:
            hint = (" (this libtcuda has no compact policy: it needs the `policy` key of TCUDA_ALLOC_CONF)"
                    if mode == "compact" else "")
            raise SystemExit("FAIL: libtcuda rejects TCUDA_ALLOC_CONF=%r: %s%s" % (conf, e, hint))
        if mode == "compact" and COMPACT_CONF not in settings.split(","):
            raise SystemExit("FAIL: TCUDA_ALLOC_CONF=%r but libtcuda's config is %r" % (conf, settings))
        tcuda.interop.use_in_torch()  # before torch's first CUDA allocation
        reserved = lambda: tcuda.memory_reserved(0)
        empty_cache = tcuda.empty_cache  # torch does not forward empty_cache to a pluggable allocator
        stats = lambda: tcuda.memory_stats(0)
        reset_peaks = lambda: tcuda.reset_peak_memory_stats(0)
    else:
        settings = ""
        reserved = lambda: torch.cuda.memory_reserved(0)
        empty_cache = torch.cuda.empty_cache
        stats = lambda: torch.cuda.memory_stats(0)
        reset_peaks = lambda: torch.cuda.reset_peak_memory_stats(0)
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda", 0)

    def used():  # cudaMemGetInfo: device memory in use, physical
        free, total = torch.cuda.mem_get_info(0)
        return total - free

    model = build_model(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator(device=dev).manual_seed(1)
    losses, cycle_ms, peak = [], [], [0]

    def step(bs, seq):
        x = torch.randint(0, VOCAB, (bs, seq + 1), device=dev, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        peak[0] = max(peak[0], used())
        loss.backward()
        peak[0] = max(peak[0], used())
        opt.step()
        opt.zero_grad(set_to_none=True)
        peak[0] = max(peak[0], used())
        losses.append(loss.item())

    # Cycle 0 runs every step shape once before anything is measured: CUDA
    # loads kernels lazily (device memory outside any allocator), and the
    # cuBLAS handle and its workspace are made at the first matmul. Then
    # the cache is emptied and the baseline is the memory in use minus the
    # allocator's reserved bytes: the context, the kernels and the handles,
    # the same in all three runs. What the allocator still holds (the
    # parameters and optimizer state, the cuBLAS workspace that torch
    # allocates through it) counts as the loop's, as it counts in torch's
    # peak allocated.
    for bs, seq in SHAPES:
        step(bs, seq)
    torch.cuda.synchronize()
    empty_cache()
    torch.cuda.synchronize()
    baseline = used() - reserved()
    reset_peaks()
    peak[0] = 0
    # Cycle 1 fills the caches (untimed); cycles 2.. are timed, each step
    # between two synchronizations; the step time is the median over cycles
    # of a cycle's time per step, so every cycle has every shape. The
    # cudaMemGetInfo samples are in the timed steps of every run alike.
    for c in range(1, cycles + 1):
        ms = 0.0
        for bs, seq in SHAPES:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(bs, seq)
            torch.cuda.synchronize()
            ms += (time.perf_counter() - t0) * 1000.0
        if c > 1:
            cycle_ms.append(ms / len(SHAPES))
        else:
            st1 = stats()
    st = stats()
    return {"mode": mode, "conf": os.environ.get("TCUDA_ALLOC_CONF"), "settings": settings,
            "losses": [float(v).hex() for v in losses], "step_ms": statistics.median(cycle_ms),
            "cycle_ms": cycle_ms, "baseline": baseline, "physical_peak": peak[0] - baseline,
            "peak_allocated": int(st.get("allocated_bytes.all.peak", 0)),
            "peak_reserved": int(st.get("reserved_bytes.all.peak", 0)),
            "num_allocs": int(st.get("allocation.all.allocated", 0)),
            # device calls in the timed cycles: cudaMalloc/cudaFree, or
            # page maps/unmaps under compact
            "timed_device_allocs": int(st.get("num_device_alloc", 0)) - int(st1.get("num_device_alloc", 0)),
            "timed_device_frees": int(st.get("num_device_free", 0)) - int(st1.get("num_device_free", 0))}


def child(mode, cycles):
    """run(mode) in a fresh process; (result, None) or (None, why it failed)."""
    env = dict(os.environ)
    for k in CONF_VARS:
        env.pop(k, None)
    if mode == "compact":
        env["TCUDA_ALLOC_CONF"] = COMPACT_CONF
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--cycles", str(cycles)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return None, "the %s run failed (exit %d):\n%s" % (mode, r.returncode, (r.stdout + r.stderr)[-3000:].strip())
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def measure(cycles, rounds=1):
    """The three runs, `rounds` times with the order reversed every other
    round (this host's speed drifts within a run): ({mode: result},
    [failures]). A mode's step_ms is the median of its rounds' medians,
    its physical peak the highest; its losses must not change between
    rounds (the loop is deterministic)."""
    res, fail, times = {}, [], {m: [] for m in MODES}
    for r in range(rounds):
        for mode in (MODES if r % 2 == 0 else tuple(reversed(MODES))):
            got, why = child(mode, cycles)
            if why:
                fail.append(why)
                continue
            times[mode].append(got["step_ms"])
            prev = res.get(mode)
            if prev is None:
                res[mode] = got
                continue
            if prev["losses"] != got["losses"]:
                fail.append("losses of the %s run changed between rounds" % mode)
            for k in ("physical_peak", "peak_reserved", "timed_device_allocs", "timed_device_frees"):
                prev[k] = max(prev[k], got[k])
    for mode, ts in times.items():
        if mode in res:
            res[mode]["step_ms"] = statistics.median(ts)
            res[mode]["round_ms"] = ts
    return res, fail


def check(res):
    """The memory bound and the loss identity (not the step time)."""
    fail = []
    a, b, c = (res.get(m) for m in MODES)
    for r in (b, c):
        if r and r["num_allocs"] <= 0:
            fail.append("the %s run saw no allocations in tcuda: the pluggable allocator was not used" % r["mode"])
    if a and c and c["physical_peak"] > bound(a["peak_allocated"]):
        fail.append("compact's physical peak %d bytes > max(1.10 x, +4 MiB) of torch's peak allocated %d = %d"
                    % (c["physical_peak"], a["peak_allocated"], bound(a["peak_allocated"])))
    if b and c:
        if not b["losses"] or len(c["losses"]) != len(b["losses"]):
            fail.append("losses: %d from compact, %d from tcuda" % (len(c["losses"]), len(b["losses"])))
        elif c["losses"] != b["losses"]:
            i = next(i for i, (x, y) in enumerate(zip(c["losses"], b["losses"])) if x != y)
            fail.append("losses differ from step %d: compact %s, tcuda %s" % (i, c["losses"][i], b["losses"][i]))
    return fail


def report(res):
    """Human-readable figures of every run that finished."""
    lines = []
    for m in MODES:
        r = res.get(m)
        if not r:
            continue
        rounds = r.get("round_ms", [r["step_ms"]])
        lines.append("%-7s step %.3f ms (median of %d cycles%s), physical peak %.1f MiB over a baseline of %.1f MiB, "
                     "peak allocated %.1f MiB, peak reserved %.1f MiB, %d device allocs / %d frees in the timed "
                     "cycles%s"
                     % (m, r["step_ms"], len(r["cycle_ms"]),
                        "; rounds %s" % " ".join("%.3f" % t for t in rounds) if len(rounds) > 1 else "",
                        r["physical_peak"] / MIB, r["baseline"] / MIB, r["peak_allocated"] / MIB,
                        r["peak_reserved"] / MIB, r["timed_device_allocs"], r["timed_device_frees"],
                        ", config %s" % r["settings"] if r["settings"] else ""))
    a, b, c = (res.get(m) for m in MODES)
    if a and c:
        lines.append("compact physical peak / torch peak allocated: %.4f (bound %.1f MiB); step time compact / torch: "
                     "%.4f" % (c["physical_peak"] / a["peak_allocated"], bound(a["peak_allocated"]) / MIB,
                               c["step_ms"] / a["step_ms"]))
        if c["peak_reserved"] > bound(a["peak_allocated"]):
            # cudaMemGetInfo is sampled three times a step; tcuda's own peak
            # reserved (mapped pages under compact) sees every mapping
            lines.append("NOTE: compact's peak reserved %d bytes is over the bound %d (not checked here)"
                         % (c["peak_reserved"], bound(a["peak_allocated"])))
    if a and b:
        lines.append("tcuda's losses %s torch's" % ("equal" if a["losses"] == b["losses"] else "DIFFER from"))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description="A training loop on torch's allocator, on tcuda and on tcuda's "
                                 "compact policy, each in its own process; checks the compact policy's memory "
                                 "bound and loss identity.")
    ap.add_argument("--mode", choices=MODES, help="one run in this process, its figures as one JSON line")
    ap.add_argument("--cycles", type=int, default=6, help="measured cycles of %d steps (>= 2; default 6)"
                    % len(SHAPES))
    a = ap.parse_args(argv)
    if a.cycles < 2:
        ap.error("--cycles must be at least 2 (the first measured cycle is not timed)")
    if a.mode:
        print(json.dumps(run(a.mode, a.cycles)))
        return 0
    res, fail = measure(a.cycles)
    fail += check(res)
    print(report(res))
    for f in fail:
        print("FAIL:", f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
