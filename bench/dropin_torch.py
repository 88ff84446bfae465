#!/usr/bin/env python3
"""tcuda as torch's allocator (tcuda.torch.install()) against torch's own,
side by side in one run. Each run is its own process: native torch, tcuda
with policy:torch, tcuda with policy:compact, in rounds of alternating
order; figures are the median over rounds. RESULT lines (format:
bench/run-gpu), name torch_dropin:

  empty_free_py_ns     a cached 4 KiB torch.empty + del from Python, ns per
                       pair; ref native (target <=ref: no slower than
                       native torch)
  step_ms              the training loop of tests/python/train_compact.py,
                       median step time, policy:torch; ref native
                       (target <=ref*1.02)
  empty_free_py_host_normalised
                       the same pair, each process's over its own CPU
                       pair, tcuda over native (target <=1)
  step_ms_compact      the same under policy:compact (target <=ref*1.05)
  step_same_speed, step_same_speed_compact
                       step over native's in the rounds run at one host
                       speed (below; targets <=1.02 and <=1.05)
  physical_peak        compact's peak device memory in use over the loop's
                       baseline (cudaMemGetInfo); ref native's peak
                       allocated (target <=ref*1.10)
  losses_equal         1 when both tcuda runs' losses are native's bit for bit

The same pair from C++ (at::empty + free through c10's allocator, tcuda's
c10 shim against torch's) is bench_alloc's to measure: compiling a torch
extension here took most of this script's time.

Without torch, a GPU or tcuda.torch it prints SKIPPED and exits 0. libtcuda:
TCUDA_LIBRARY, else TCUDA_BINARY_DIR/src/libtcuda.so (bench/run-gpu sets
TCUDA_BINARY_DIR); the glue is cached in TCUDA_BINARY_DIR/torch-glue and
built once, before the timed runs.

The Python pair is a few microseconds of interpreter work around one
allocator call, so it moves with the host's speed from process to process
(a virtualised host has been seen switching between two speeds). So:
after the full rounds come pair-only rounds, a native and a tcuda process
next to each other in time; and each process times the same pair on the
CPU in alternating chunks, the host's speed at that moment.
empty_free_py_ns is the median over all processes;
empty_free_py_host_normalised is the median over paired runs of
(tcuda's CUDA pair / its CPU pair) / (native's CUDA pair / its CPU pair).
The step is partly GPU time, so it is not divided by the CPU pair: each
measured cycle is followed by a CPU pair, and step_same_speed (and
_compact) is the median step ratio over the full rounds whose native and
tcuda processes ran at the same host speed (CPU pairs within 15 %).

Size (defaults finish in under three minutes on an H200 once the glue is
built): TORCH_DROPIN_SCALE multiplies the full rounds (4), the measured
training cycles per run (6), the Python pairs (20000) and the pair-only
rounds (4);
TORCH_DROPIN_ROUNDS, TORCH_DROPIN_CYCLES and TORCH_DROPIN_PAIR_ROUNDS (0
for none) set those directly. TORCH_DROPIN_BUDGET_S (200): no new round
starts once the runs so far predict it would end past this many seconds
(at least one full round always runs).
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
BACKENDS = ("native", "tcuda", "compact")
CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "TCUDA_ALLOC_CONF",
             "TCUDA_TORCH_ALLOCATOR")


def _env_num(name, default, kind=float):
    """A positive number from the environment; ValueError names the variable."""
    v = os.environ.get(name, "")
    if not v.strip():
        return default
    try:
        x = kind(v)
    except ValueError:
        raise ValueError("%s=%r is not a %s" % (name, v, "number" if kind is float else "whole number")) from None
    if not x > 0:
        raise ValueError("%s=%r must be above 0" % (name, v))
    return x


def sizes():
    """(rounds, cycles, pairs, pair_rounds) from the environment."""
    scale = _env_num("TORCH_DROPIN_SCALE", 1.0)
    rounds = _env_num("TORCH_DROPIN_ROUNDS", max(1, round(4 * scale)), int)
    cycles = max(2, _env_num("TORCH_DROPIN_CYCLES", max(2, round(6 * scale)), int))  # the first is warm-up
    pairs = max(1000, int(20000 * scale))
    pr = os.environ.get("TORCH_DROPIN_PAIR_ROUNDS", "").strip()
    pair_rounds = 0 if pr == "0" else _env_num("TORCH_DROPIN_PAIR_ROUNDS", max(1, round(4 * scale)), int)
    return rounds, cycles, pairs, pair_rounds


def pair_chunk_ns(torch, device, chunk):
    """One chunk of cached 4 KiB torch.empty + del on device, ns per pair."""
    t0 = time.perf_counter_ns()
    for _ in range(chunk):
        t = torch.empty(1024, device=device)
        del t
    return (time.perf_counter_ns() - t0) / chunk


def py_pair_ns(torch, pairs, repeats):
    """(cuda, cpu): the fastest chunk of the pair on the GPU, and of the same
    pair on the CPU. The chunks alternate, so both sample the host at the
    same speed: the CPU pair is the same interpreter and dispatcher work
    without the CUDA allocator, the yardstick for the host's speed in this
    process."""
    chunk = 2000
    n = max(1, pairs * repeats // chunk)
    best = {"cuda": float("inf"), "cpu": float("inf")}
    for _ in range(n):
        for dev in ("cuda", "cpu"):
            best[dev] = min(best[dev], pair_chunk_ns(torch, dev, chunk))
    return best["cuda"], best["cpu"]


def cpu_pair_ns(torch, chunk=2000, repeats=3):
    """The fastest of a few chunks of the pair on the CPU, ns per pair."""
    return min(pair_chunk_ns(torch, "cpu", chunk) for _ in range(repeats))


def same_speed_ratios(rounds_got, backend, tolerance=0.15):
    """backend's step over native's, for the rounds whose two processes ran
    at the same host speed (their CPU pairs within `tolerance`)."""
    out = []
    for got in rounds_got:
        n, b = got.get("native"), got.get(backend)
        if not n or not b or "step_host_ns" not in n or "step_host_ns" not in b:
            continue
        if abs(b["step_host_ns"] / n["step_host_ns"] - 1.0) <= tolerance:
            out.append(b["step_ms"] / n["step_ms"])
    return out


def child_pair(backend, pairs):
    if backend != "native":
        import tcuda.torch
        tcuda.torch.install()
    import torch
    torch.empty(1, device="cuda")
    cuda, cpu = py_pair_ns(torch, pairs, 5)
    r = {"backend": backend, "py_ns": cuda, "py_cpu_ns": cpu}
    if backend != "native":
        r["installed"] = tcuda.torch.is_installed()
    return r


def child(backend, cycles, pairs):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if backend != "native":
        import tcuda.torch
        tcuda.torch.install()
    import torch
    r = {"backend": backend}
    torch.empty(1, device="cuda")
    r["py_ns"], r["py_cpu_ns"] = py_pair_ns(torch, pairs, 3)
    # the training loop of tests/python/train_compact.py, on torch's API
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import train_compact as tc
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda", 0)

    def used():
        free, total = torch.cuda.mem_get_info(0)
        return total - free

    model = tc.build_model(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator(device=dev).manual_seed(1)
    losses, cycle_ms, peak = [], [], [0]

    def step(bs, seq):
        x = torch.randint(0, tc.VOCAB, (bs, seq + 1), device=dev, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        peak[0] = max(peak[0], used())
        loss.backward()
        peak[0] = max(peak[0], used())
        opt.step()
        opt.zero_grad(set_to_none=True)
        peak[0] = max(peak[0], used())
        losses.append(loss.item())

    for bs, seq in tc.SHAPES:  # warm-up: kernels, cuBLAS handle
        step(bs, seq)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    baseline = used() - torch.cuda.memory_reserved(0)
    torch.cuda.reset_peak_memory_stats(0)
    peak[0] = 0
    host_ns = []  # the CPU pair after each measured cycle: the host's speed then
    for c in range(1, cycles + 1):
        ms = 0.0
        for bs, seq in tc.SHAPES:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(bs, seq)
            torch.cuda.synchronize()
            ms += (time.perf_counter() - t0) * 1000.0
        if c > 1:
            cycle_ms.append(ms / len(tc.SHAPES))
            host_ns.append(cpu_pair_ns(torch))
    st = torch.cuda.memory_stats(0)
    r.update({"losses": [float(v).hex() for v in losses], "step_ms": statistics.median(cycle_ms),
              "step_host_ns": statistics.median(host_ns),
              "physical_peak": peak[0] - baseline, "peak_allocated": int(st.get("allocated_bytes.all.peak", 0)),
              "peak_reserved": int(st.get("reserved_bytes.all.peak", 0))})
    if backend != "native":
        import tcuda.torch
        r["installed"] = tcuda.torch.is_installed()
    return r


def main():
    try:
        rounds, cycles, pairs, pair_rounds = sizes()
        budget = _env_num("TORCH_DROPIN_BUDGET_S", 200.0)
    except ValueError as e:
        print("torch_dropin:", e, file=sys.stderr)
        return 2
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], cycles, pairs)))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--child-pair":
        print(json.dumps(child_pair(sys.argv[2], pairs)))
        return 0
    t_start = time.monotonic()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        print("SKIPPED torch_dropin: cannot import torch (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIPPED torch_dropin: no GPU")
        return 0
    build = os.environ.get("TCUDA_BINARY_DIR")
    if not os.environ.get("TCUDA_LIBRARY") and build and os.path.exists(os.path.join(build, "src", "libtcuda.so")):
        os.environ["TCUDA_LIBRARY"] = os.path.join(build, "src", "libtcuda.so")
    if build:
        os.environ.setdefault("TCUDA_TORCH_CACHE", os.path.join(build, "torch-glue"))
    pp = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + (os.pathsep + pp if pp else "")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import tcuda.torch
        t0 = time.monotonic()
        tcuda.torch.build()  # once, here: the children then load it from the cache
        print("glue ready in %.1f s" % (time.monotonic() - t0))
    except Exception as e:  # noqa: BLE001
        print("SKIPPED torch_dropin: no tcuda.torch (%s)" % e)
        return 0
    runs, fail = {b: [] for b in BACKENDS}, []
    pair_ratios = []  # tcuda / native Python pair, from runs next to each other in time
    norm_ratios = []  # the same, each run's pair over its own CPU pair first

    def run_child(mode, b):
        env = {k: v for k, v in os.environ.items() if k not in CONF_VARS}
        if b != "native":
            env["TCUDA_ALLOC_CONF"] = "policy:" + ("compact" if b == "compact" else "torch")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), mode, b], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail.append("%s run failed (exit %d): %s" % (b, p.returncode, (p.stdout + p.stderr)[-1500:]))
            return None
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if b != "native" and not r.get("installed"):
            fail.append("%s: tcuda.torch.install() did not take" % b)
        return r

    def add_ratios(got):
        t, n = got["tcuda"], got["native"]
        pair_ratios.append(t["py_ns"] / n["py_ns"])
        norm_ratios.append((t["py_ns"] / t["py_cpu_ns"]) / (n["py_ns"] / n["py_cpu_ns"]))

    round_s, full_rounds = [], []
    for rnd in range(rounds):
        spent = time.monotonic() - t_start
        if round_s and spent + max(round_s) > budget:
            print("stopping after %d of %d rounds: another would end past TORCH_DROPIN_BUDGET_S=%g s"
                  % (rnd, rounds, budget))
            break
        t_round = time.monotonic()
        got = {}
        for b in (BACKENDS if rnd % 2 == 0 else tuple(reversed(BACKENDS))):
            r = run_child("--child", b)
            if r is not None:
                runs[b].append(r)
                got[b] = r
        full_rounds.append(got)
        if "native" in got and "tcuda" in got:
            add_ratios(got)
        round_s.append(time.monotonic() - t_round)
    # The Python pair is a few microseconds of interpreter work around the
    # allocator's call, so the host's speed between processes moves it more
    # than the allocator does: more, shorter processes, paired in time.
    for rnd in range(pair_rounds):
        if time.monotonic() - t_start > budget:
            print("stopping the pair-only rounds after %d of %d: past TORCH_DROPIN_BUDGET_S=%g s"
                  % (rnd, pair_rounds, budget))
            break
        got = {}
        for b in (("native", "tcuda") if rnd % 2 == 0 else ("tcuda", "native")):
            r = run_child("--child-pair", b)
            if r is not None:
                runs[b].append({"py_ns": r["py_ns"], "py_cpu_ns": r["py_cpu_ns"], "pair_only": True})
                got[b] = r
        if len(got) == 2:
            add_ratios(got)
    full = {b: [r for r in rs if not r.get("pair_only")] for b, rs in runs.items()}
    med = {b: {"py_ns": statistics.median(r["py_ns"] for r in runs[b]),
               "step_ms": statistics.median(r["step_ms"] for r in rs)}
           for b, rs in full.items() if rs}
    for b, rs in full.items():
        if rs:
            med[b]["physical_peak"] = max(r["physical_peak"] for r in rs)
            med[b]["peak_allocated"] = max(r["peak_allocated"] for r in rs)
            print("%-7s Python %.1f ns per 4 KiB empty+free; step %.3f ms (rounds %s); physical peak "
                  "%.1f MiB, peak allocated %.1f MiB"
                  % (b, med[b]["py_ns"], med[b]["step_ms"], " ".join("%.3f" % r["step_ms"] for r in rs),
                     med[b]["physical_peak"] / MIB, med[b]["peak_allocated"] / MIB))
    n, t, c = (med.get(b) for b in BACKENDS)
    if pair_ratios:
        print("Python pair, tcuda / native in runs paired in time: median %.3f over %d pairs (%s)"
              % (statistics.median(pair_ratios), len(pair_ratios), " ".join("%.2f" % x for x in pair_ratios)))
        print("  each over its own process's CPU pair first: median %.3f (%s)"
              % (statistics.median(norm_ratios), " ".join("%.2f" % x for x in norm_ratios)))
        for b in ("native", "tcuda"):
            print("  %-6s CUDA pair ns %s; CPU pair ns %s" % (
                b, " ".join("%.0f" % r["py_ns"] for r in runs[b]), " ".join("%.0f" % r["py_cpu_ns"] for r in runs[b])))
    if n and t:
        print("RESULT name=torch_dropin metric=empty_free_py_ns tcuda=%.2f ref_name=torch ref=%.2f unit=ns "
              "target=<=ref (no slower than native torch)" % (t["py_ns"], n["py_ns"]))
        if norm_ratios:
            print("RESULT name=torch_dropin metric=empty_free_py_host_normalised tcuda=%.4f ref_name=torch ref=1 "
                  "unit=ratio target=<=ref (each process's CUDA pair over its CPU pair, tcuda over native, "
                  "median of runs paired in time)" % statistics.median(norm_ratios))
        print("RESULT name=torch_dropin metric=step_ms tcuda=%.4f ref_name=torch ref=%.4f unit=ms "
              "target=<=ref*1.02 (policy:torch)" % (t["step_ms"], n["step_ms"]))
    # The step is mostly host work (kernel launches), so a round whose two
    # processes ran at different host speeds compares the host, not the
    # allocator: the same-speed rounds' ratios are the steadier figure.
    for b, metric, factor in (("tcuda", "step_same_speed", 1.02), ("compact", "step_same_speed_compact", 1.05)):
        rs = same_speed_ratios(full_rounds, b)
        print("step, %s / native, rounds at the same host speed: %s (of %d rounds)"
              % (b, " ".join("%.3f" % x for x in rs) or "none", len(full_rounds)))
        if rs:
            print("RESULT name=torch_dropin metric=%s tcuda=%.4f ref_name=torch ref=1 unit=ratio "
                  "target=<=ref*%.2f (median over %d round(s) whose processes ran at the same host speed)"
                  % (metric, statistics.median(rs), factor, len(rs)))
    if n and c:
        print("RESULT name=torch_dropin metric=step_ms_compact tcuda=%.4f ref_name=torch ref=%.4f unit=ms "
              "target=<=ref*1.05 (policy:compact)" % (c["step_ms"], n["step_ms"]))
        print("RESULT name=torch_dropin metric=physical_peak tcuda=%d ref_name=torch ref=%d unit=bytes "
              "target=<=ref*1.10 (compact's physical peak against torch's peak allocated)"
              % (c["physical_peak"], n["peak_allocated"]))
    if full["native"] and (full["tcuda"] or full["compact"]):
        same = all(r["losses"] == full["native"][0]["losses"] for b in ("tcuda", "compact") for r in full[b])
        print("RESULT name=torch_dropin metric=losses_equal tcuda=%d ref_name=- ref=NA unit=bool target===1" % same)
        if not same:
            fail.append("losses differ from native torch's")
    print("total %.1f s, %d round(s), %d measured cycles per run" % (time.monotonic() - t_start, len(round_s), cycles))
    for f in fail:
        print("FAIL:", f)
    return 1 if fail else 0


if __name__ == "__main__":
    raise SystemExit(main())
