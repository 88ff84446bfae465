#!/usr/bin/env python3
"""torch's RNG fills for bench_rng's torch column: GB/s of output on 2^28
elements per dtype (RNG_N overrides), best of 5 rounds of 20 calls timed
with CUDA events, the same metric names as bench_rng. SKIPPED without torch
or a GPU. Prints RESULT lines (format: bench/run-gpu)."""
import os
import sys


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print("SKIPPED rng_torch: cannot import torch (%s)" % e)
        return 0
    if not torch.cuda.is_available():
        print("SKIPPED rng_torch: no GPU")
        return 0
    n = int(os.environ.get("RNG_N", str(1 << 28)), 0)
    torch.cuda.manual_seed(0)
    cases = [
        ("uniform_f32", torch.float32, lambda t: t.uniform_()),
        ("uniform_f64", torch.float64, lambda t: t.uniform_()),
        ("uniform_f16", torch.float16, lambda t: t.uniform_()),
        ("uniform_bf16", torch.bfloat16, lambda t: t.uniform_()),
        ("normal_f32", torch.float32, lambda t: t.normal_()),
        ("normal_f64", torch.float64, lambda t: t.normal_()),
        ("normal_f16", torch.float16, lambda t: t.normal_()),
        ("normal_bf16", torch.bfloat16, lambda t: t.normal_()),
        ("randint_i64", torch.int64, lambda t: t.random_(0, 1000)),
        ("randint_i64_2p40", torch.int64, lambda t: t.random_(0, 1 << 40)),
        ("randint_i64_1e12", torch.int64, lambda t: t.random_(0, 10**12)),
        ("randint_i32", torch.int32, lambda t: t.random_(0, 1000)),
        ("random_i64", torch.int64, lambda t: t.random_()),
        ("random_i32", torch.int32, lambda t: t.random_()),
        ("random_f32", torch.float32, lambda t: t.random_()),
        ("random_f64", torch.float64, lambda t: t.random_()),
        ("random_u8", torch.uint8, lambda t: t.random_()),
    ]
    for metric, dt, fn in cases:
        t = torch.empty(n, dtype=dt, device="cuda")
        for _ in range(3):
            fn(t)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(5):
            a.record()
            for _ in range(20):
                fn(t)
            b.record()
            b.synchronize()
            best = min(best, a.elapsed_time(b) / 20)
        gbps = n * t.element_size() / (best * 1e6)
        print("RESULT name=rng metric=%s_GBps torch=%.0f unit=GB/s" % (metric, gbps), flush=True)
        del t
    return 0


if __name__ == "__main__":
    sys.exit(main())
