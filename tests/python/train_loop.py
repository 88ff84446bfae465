"""A deterministic PyTorch training loop, once on PyTorch's own allocator and
once with tcuda as its CUDAPluggableAllocator, in subprocesses. Checked:

- the loss lists are identical bit for bit;
- after every step, the allocator's decisions are torch's: allocation
  count, requested bytes, allocated bytes, segment count and reserved
  bytes, and their peaks;
- the counters that depend on where the driver put segments (inactive
  split blocks and bytes, ...) can differ between two processes, so a third
  run records torch's history, and tcuda replays it on the simulated device
  at torch's recorded segment addresses: every memory_stats() key must then
  equal torch's at the end.

RESULT lines for peak reserved memory and step time (tcuda vs torch,
measured in this one run).

    python3 train_loop.py            # compare (exit 1 on any difference)
    python3 train_loop.py --mode torch|tcuda|history [--steps N] [--out DIR]   # one run, JSON out
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# memory_stats() keys compared after every step: what the requests and the
# policy decide, whichever addresses the driver hands out.
STEP_KEYS = ("allocation.all.allocated", "allocation.all.current", "allocation.all.peak",
             "requested_bytes.all.allocated", "requested_bytes.all.current", "requested_bytes.all.peak",
             "allocated_bytes.all.current", "allocated_bytes.all.peak",
             "segment.all.current", "segment.all.peak", "reserved_bytes.all.current", "reserved_bytes.all.peak",
             "num_alloc_retries", "num_ooms")


def write_history(torch, out):
    """torch's recorded history as a tcuda trace (one checkpoint at the end)
    and the addresses its cudaMallocs returned."""
    snap = torch.cuda.memory._snapshot()
    ents = snap["device_traces"][0]
    streams, ids, live, lines, addrs, nid = {}, {}, {}, [], [], 0
    for e in ents:
        act, addr, size = e["action"], int(e["addr"]), int(e["size"])
        sno = streams.setdefault(e.get("stream", 0), len(streams))
        if act == "alloc":
            ids[addr] = nid
            lines.append("a %d %d %d" % (nid, size, sno))
            nid += 1
        elif act == "free_completed":
            lines.append("f %d" % ids.pop(addr))
        elif act == "segment_alloc":
            addrs.append("%d %d" % (addr, size))
        elif act in ("segment_free", "segment_map", "segment_unmap", "oom"):
            raise SystemExit("history has a %s entry: this loop should make none" % act)
    if len(ents) >= 1000000:
        raise SystemExit("history ring buffer full")
    lines.append("c")
    with open(os.path.join(out, "train.trace"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "train.addresses"), "w") as fh:
        fh.write("".join(a + "\n" for a in addrs))
    return len(ents)


def run(mode, steps, out_dir=None):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    if mode == "history":  # before the first CUDA allocation, so nothing is missed
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 max_entries=1000000)
    if mode == "tcuda":
        import tcuda
        tcuda.interop.use_in_torch()  # before the first CUDA allocation
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    # The math attention kernels: bmm and softmax, deterministic by construction.
    for name in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
        if hasattr(torch.backends.cuda, name):
            getattr(torch.backends.cuda, name)(False)
    dev = torch.device("cuda", 0)

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Dropout(0.1),
        torch.nn.Linear(64 * 16 * 16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    attn = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1,
                                            batch_first=True).to(dev)
    head = torch.nn.Linear(64, 10).to(dev)
    params = list(model.parameters()) + list(attn.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)  # synthetic data on the CPU, then copied
    images = torch.randn(8, 64, 3, 32, 32, generator=g)
    tokens = torch.randn(8, 64, 16, 64, generator=g)
    labels = torch.randint(0, 10, (8, 64), generator=g)

    if mode == "tcuda":
        import tcuda
        stats_of = lambda: tcuda.memory_stats(0)
    else:
        stats_of = lambda: torch.cuda.memory_stats(0)
    per_step = []
    losses = []
    warmup = min(20, steps // 4)
    for step in range(steps):
        if step == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        i = step % 8
        x, y = images[i].to(dev, non_blocking=False), labels[i].to(dev)
        seq = tokens[i].to(dev)
        out = model(x) + head(attn(seq).mean(dim=1))
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        st = stats_of()
        per_step.append([int(st.get(k, 0)) for k in STEP_KEYS])
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1000.0 / (steps - warmup)

    res = {"mode": mode, "losses": [float(v).hex() for v in losses], "step_ms": step_ms, "per_step": per_step}
    if mode == "history":
        res["entries"] = write_history(torch, out_dir)
        res["final_stats"] = {k: int(v) for k, v in torch.cuda.memory_stats(0).items()}
        print(json.dumps(res))
        return
    if mode == "tcuda":
        import tcuda
        stats = tcuda.memory_stats(0)
        res["peak_reserved"] = tcuda.max_memory_reserved(0)
        res["allocated_live"] = tcuda.memory_allocated(0)
        res["num_allocs"] = stats["allocation.all.allocated"]
        res["segments"] = len(tcuda.memory_snapshot())
        res["summary_ok"] = "CUDA memory summary, device ID 0" in tcuda.memory_summary(0)
        del model, attn, head, opt, x, y, seq, out, loss, params
        import gc
        gc.collect()
        res["allocated_after_free"] = tcuda.memory_allocated(0)
    else:
        res["peak_reserved"] = torch.cuda.max_memory_reserved(0)
        res["allocated_live"] = torch.cuda.memory_allocated(0)
        res["num_allocs"] = torch.cuda.memory_stats(0)["allocation.all.allocated"]
    print(json.dumps(res))


def child(mode, steps, out_dir=None):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--steps", str(steps)]
                       + (["--out", out_dir] if out_dir else []), capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("FAIL: the %s run failed (exit %d)" % (mode, r.returncode))
    return json.loads(r.stdout.strip().splitlines()[-1])


def replay_check(steps):
    """torch's own history, replayed by tcuda at torch's segment addresses:
    every stats key equal at the end, the placement-dependent ones included."""
    import tempfile
    cli = os.environ.get("TCUDA_CLI")
    if not cli:
        return ["TCUDA_CLI is not set: cannot replay torch's history"]
    with tempfile.TemporaryDirectory() as d:
        hist = child("history", steps, d)
        r = subprocess.run([cli, "replay", "--simulate", "--addresses", os.path.join(d, "train.addresses"),
                            os.path.join(d, "train.trace")], capture_output=True, text=True)
        if r.returncode != 0:
            return ["tcuda replay of torch's history failed: " + r.stderr.strip()]
        got = json.loads(r.stdout)[-1]["stats"]
    want = hist["final_stats"]
    bad = ["%s tcuda %s torch %s" % (k, got.get(k), want.get(k)) for k in sorted(set(got) | set(want))
           if got.get(k) != want.get(k)]
    print("replayed torch's history of %d steps (%d entries): %d of %d stats keys equal"
          % (steps, hist["entries"], len(set(got) | set(want)) - len(bad), len(set(got) | set(want))))
    return ["replay of torch's history differs: " + "; ".join(bad[:8])] if bad else []


def compare(steps):
    ref = child("torch", steps)
    got = child("tcuda", steps)
    fail = []
    if got["losses"] != ref["losses"]:
        first = next(i for i, (a, b) in enumerate(zip(got["losses"], ref["losses"])) if a != b)
        fail.append("losses differ from step %d: tcuda %s, torch %s" % (first, got["losses"][first],
                                                                      ref["losses"][first]))
    if got["num_allocs"] <= 0:
        fail.append("tcuda saw no allocations: the pluggable allocator was not used")
    for step, (a, b) in enumerate(zip(got["per_step"], ref["per_step"])):
        if a != b:
            bad = ["%s tcuda %d torch %d" % (k, x, y) for k, x, y in zip(STEP_KEYS, a, b) if x != y]
            fail.append("after step %d the allocator differs from torch's: %s" % (step, "; ".join(bad)))
            break
    if len(got["per_step"]) != len(ref["per_step"]) or not ref["per_step"]:
        fail.append("per-step stats: %d steps from tcuda, %d from torch" % (len(got["per_step"]), len(ref["per_step"])))
    fail += replay_check(min(steps, 60))
    if not got["summary_ok"]:
        fail.append("tcuda.memory_summary() lacks its header")
    if got["allocated_after_free"] > got["allocated_live"]:
        fail.append("memory not returned: %d bytes live after freeing the model" % got["allocated_after_free"])
    print("%d steps, %d losses identical: %s; last loss %s" % (steps, len(ref["losses"]),
          got["losses"] == ref["losses"], float.fromhex(ref["losses"][-1])))
    print("RESULT name=interop metric=peak_reserved_bytes tcuda=%d ref_name=torch ref=%d unit=bytes "
          "target=equal to torch" % (got["peak_reserved"], ref["peak_reserved"]))
    print("RESULT name=interop metric=train_step_time tcuda=%.4f ref_name=torch ref=%.4f unit=ms "
          "target=within 10%% of torch" % (got["step_ms"], ref["step_ms"]))
    for f in fail:
        print("FAIL:", f)
    return 1 if fail else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["torch", "tcuda", "history"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.mode:
        run(a.mode, a.steps, a.out)
        return 0
    return compare(a.steps)


if __name__ == "__main__":
    sys.exit(main())
