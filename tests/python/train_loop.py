"""A deterministic PyTorch training loop, once on PyTorch's own allocator and
once with tcuda as its CUDAPluggableAllocator, in two subprocesses: the loss
lists must be identical bit for bit. Prints RESULT lines for peak reserved
memory and step time (tcuda vs torch, measured in this one run).

    python3 train_loop.py            # compare (exit 1 on any difference)
    python3 train_loop.py --mode torch|tcuda [--steps N]   # one run, JSON out
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(mode, steps):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
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
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1000.0 / (steps - warmup)

    res = {"mode": mode, "losses": [float(v).hex() for v in losses], "step_ms": step_ms}
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


def child(mode, steps):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--steps", str(steps)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("FAIL: the %s run failed (exit %d)" % (mode, r.returncode))
    return json.loads(r.stdout.strip().splitlines()[-1])


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
    if got["num_allocs"] != ref["num_allocs"]:
        print("note: allocation counts differ: tcuda %d, torch %d" % (got["num_allocs"], ref["num_allocs"]))
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
    ap.add_argument("--mode", choices=["torch", "tcuda"])
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    if a.mode:
        run(a.mode, a.steps)
        return 0
    return compare(a.steps)


if __name__ == "__main__":
    sys.exit(main())
