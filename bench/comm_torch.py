"""torch.cuda.comm reference numbers for bench_comm.c (same metric names).

256 MiB float32 unless named; GB/s = bytes / wall time to completion on both
GPUs, median of 10 after 3 warm-ups. Prints RESULT lines (bench/run-gpu)."""
import statistics
import sys
import time

import torch
import torch.cuda.comm as comm


def timeit(fn):
    def sync():
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
    for _ in range(3):
        fn()
        sync()
    ts = []
    for _ in range(10):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def result(metric, gbs):
    print(f"RESULT name=comm metric={metric} torch={gbs:.1f} unit=GB/s")


def main():
    if torch.cuda.device_count() < 2:
        print("comm_torch.py: needs 2 GPUs; nothing measured", file=sys.stderr)
        return
    n = (256 << 20) // 4
    big = (256 << 20) / 1e9
    a = torch.ones(n, device="cuda:0")
    b = torch.ones(n, device="cuda:1")
    h0, h1 = a[: n // 2], b[: n // 2]
    small = [torch.ones(16384, device="cuda:0") for _ in range(1000)]
    many = 1000 * 65536 / 1e9
    result("broadcast_256MiB", big / timeit(lambda: comm.broadcast(a, [0, 1])))
    result("reduce_add_256MiB", big / timeit(lambda: comm.reduce_add([a, b], 0)))
    result("scatter_256MiB_total", big / timeit(lambda: comm.scatter(a, [0, 1])))
    result("gather_256MiB_total", big / timeit(lambda: comm.gather([h0, h1], 0, 0)))
    result("broadcast_coalesced_1000x64KiB", many / timeit(lambda: comm.broadcast_coalesced(small, [0, 1])))
    # torch allocates fresh pageable memory for each gather to the host; that
    # figure is the torch column of both tcuda rows, the reused pinned output
    # (its target) and the fresh pageable one (like for like).
    to_host = big / timeit(lambda: comm.gather([h0, h1], 0, "cpu"))
    result("gather_to_host_256MiB_reused_pinned_out", to_host)
    result("gather_to_host_256MiB_fresh_pageable_out", to_host)
    pinned = torch.empty(n, pin_memory=True)
    result("gather_out_to_host_256MiB_pinned", big / timeit(lambda: comm.gather([h0, h1], 0, out=pinned)))


if __name__ == "__main__":
    main()
