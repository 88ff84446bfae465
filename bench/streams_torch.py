#!/usr/bin/env python3
"""torch.cuda's stream and event hot paths as Python code pays for them.

bench_streams' torch column is PyTorch's C++ (c10) making the same calls, so
that C is compared with C++. These are the same operations from Python, each
printed as its own informational row (metric <name>_from_python):
  pool_get        torch.cuda.Stream()              (a pool stream on the current device)
  current_stream  torch.cuda.current_stream(0)
  event_record    event.record(stream)             (stream given, as bench_streams does)
  event_query     event.query()                    (on a completed event)
Each is the best of several rounds of a timed loop, in ns per call. Without
torch or a GPU it prints SKIPPED and exits 0. STREAMS_TORCH_ITERS scales the
loop counts. Prints RESULT lines (format: bench/run-gpu).
"""
import os
import sys
import time

ROUNDS = 7


def best_ns(fn, iters):
    fn(max(1, iters // 10))  # warm up
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter_ns()
        fn(iters)
        best = min(best, (time.perf_counter_ns() - t0) / iters)
    return best


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        print("SKIPPED streams_torch: cannot import torch (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIPPED streams_torch: no GPU")
        return 0
    scale = int(os.environ.get("STREAMS_TORCH_ITERS", "1") or 1)
    torch.cuda.set_device(0)
    stream = torch.cuda.Stream()
    event = torch.cuda.Event()
    event.record(stream)
    stream.synchronize()

    def pool_get(n):
        Stream = torch.cuda.Stream
        for _ in range(n):
            Stream()

    def current_stream(n):
        cur = torch.cuda.current_stream
        for _ in range(n):
            cur(0)

    def event_record(n):
        rec = event.record
        for _ in range(n):
            rec(stream)
        stream.synchronize()

    def event_query(n):
        q = event.query
        for _ in range(n):
            q()

    rows = [
        ("pool_get", pool_get, 200000),
        ("current_stream", current_stream, 200000),
        ("event_record", event_record, 100000),
        ("event_query", event_query, 200000),
    ]
    print("%-16s %12s" % ("operation", "torch ns"))
    for metric, fn, iters in rows:
        if metric == "event_query":
            stream.synchronize()
        ns = best_ns(fn, iters * scale)
        print("%-16s %12.1f" % (metric, ns))
        print("RESULT name=streams metric=%s_from_python torch=%.1f unit=ns "
              "target=informational (torch.cuda from Python)" % (metric, ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
