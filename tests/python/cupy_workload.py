"""A CuPy workload (matmuls, FFTs, reductions, sorting, elementwise kernels,
many temporaries of many sizes), once on CuPy's memory pool and once with
tcuda as CuPy's allocator, in two subprocesses: the results must be
identical byte for byte. Prints a RESULT line for the run time.

    python3 cupy_workload.py                  # compare (exit 1 on a difference)
    python3 cupy_workload.py --mode cupy|tcuda
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time


def run(mode, iters):
    import cupy as cp
    if mode == "tcuda":
        import tcuda
        tcuda.interop.use_in_cupy()
    rs = cp.random.RandomState(1234)
    digest = hashlib.sha256()
    sums = []

    def keep(a):
        host = cp.asnumpy(a)
        digest.update(host.tobytes())
        sums.append(float(host.astype("float64").sum()).hex())

    cp.cuda.Device(0).synchronize()
    t0 = time.perf_counter()
    side = cp.cuda.Stream(non_blocking=True)
    for it in range(iters):
        n = 64 + 32 * (it % 7)
        a = rs.standard_normal((n, n), dtype=cp.float32)
        b = rs.standard_normal((n, n), dtype=cp.float32)
        c = a @ b + cp.tanh(a) * 0.5
        f = cp.fft.rfft(c, axis=1)
        d = cp.abs(f).astype(cp.float32)
        s = cp.sort(d.ravel())
        m = cp.cumsum(s[::3]) / (1 + cp.arange(s[::3].size, dtype=cp.float32))
        ints = rs.randint(0, 1000, size=4096 + it)
        hist = cp.bincount(ints, minlength=1000)
        # memory used on a second stream too; it reads `a`, so it waits for
        # the stream that wrote it (without the wait the result races with
        # the generator, and a busy GPU made the two runs differ)
        side.wait_event(cp.cuda.get_current_stream().record())
        with side:
            e = cp.exp(-cp.square(a)).sum(axis=0)
        side.synchronize()
        if it % 10 == 0:
            keep(c)
            keep(m)
            keep(hist)
            keep(e)
        big = cp.ones((1 << 20) + it, dtype=cp.float64)  # large-pool sizes
        sums.append(float(big.sum()).hex())
        del a, b, c, f, d, s, m, ints, hist, e, big
    cp.cuda.Device(0).synchronize()
    elapsed = (time.perf_counter() - t0) * 1000.0
    res = {"mode": mode, "digest": digest.hexdigest(), "sums": sums, "ms": elapsed}
    if mode == "tcuda":
        import tcuda
        st = tcuda.memory_stats(0)
        res["num_allocs"] = st["allocation.all.allocated"]
        res["peak_reserved"] = tcuda.max_memory_reserved(0)
        res["allocated_now"] = tcuda.memory_allocated(0)
    print(json.dumps(res))


def child(mode, iters):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--iters", str(iters)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("FAIL: the %s run failed (exit %d)" % (mode, r.returncode))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["cupy", "tcuda"])
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()
    if a.mode:
        run(a.mode, a.iters)
        return 0
    ref, got = child("cupy", a.iters), child("tcuda", a.iters)
    fail = []
    if got["digest"] != ref["digest"] or got["sums"] != ref["sums"]:
        fail.append("results differ between CuPy's pool and tcuda")
    if got["num_allocs"] <= 0:
        fail.append("tcuda saw no allocations: CuPy did not use it")
    print("%d iterations, results identical: %s; tcuda: %d allocations, peak reserved %d bytes, %d live"
          % (a.iters, not fail, got["num_allocs"], got["peak_reserved"], got["allocated_now"]))
    print("RESULT name=interop metric=cupy_workload_time tcuda=%.3f ref_name=cupy ref=%.3f unit=ms "
          "target=within 10%% of CuPy's pool" % (got["ms"], ref["ms"]))
    for f in fail:
        print("FAIL:", f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
