#!/usr/bin/env python3
"""torch.cuda.CUDAGraph.replay of 100 add_ kernels, for bench_graph's torch column.

Same metric names as bench/bench_graph.c:
  replay_launch_us  host time of one g.replay() call (Python included: that is
                    what torch users pay), 100 calls per round, median round
  replay_us         wall time per replay, GPU included (100 replays, then sync)
  eager_us          the 100 add_ calls launched one by one, then sync
Without torch or a GPU it prints SKIPPED and exits 0. GRAPH_TORCH_ROUNDS sets
the round count. Prints RESULT lines (format: bench/run-gpu).
"""
import os
import statistics
import time

NODES = 100
PER_ROUND = 100


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        print("SKIPPED graph_torch: cannot import torch (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIPPED graph_torch: no GPU")
        return 0
    rounds = int(os.environ.get("GRAPH_TORCH_ROUNDS", "21") or 21)
    torch.cuda.set_device(0)
    x = torch.zeros(16, device="cuda")
    s = torch.cuda.Stream()

    def eager():
        for _ in range(NODES):
            x.add_(1)

    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as the docs advise
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()
    with torch.cuda.stream(s):
        for _ in range(50):
            g.replay()
        torch.cuda.synchronize()
        launch, wall, eag = [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(PER_ROUND):
                g.replay()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            launch.append((t1 - t0) * 1e6 / PER_ROUND)
            wall.append((t2 - t0) * 1e6 / PER_ROUND)
            t0 = time.perf_counter()
            for _ in range(10):
                eager()
            torch.cuda.synchronize()
            eag.append((time.perf_counter() - t0) * 1e6 / 10)
    print("RESULT name=graph metric=replay_launch_us torch=%.3f unit=us" % statistics.median(launch))
    print("RESULT name=graph metric=replay_us torch=%.2f unit=us" % statistics.median(wall))
    print("RESULT name=graph metric=eager_us torch=%.2f unit=us" % statistics.median(eag))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
