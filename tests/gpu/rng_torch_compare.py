#!/usr/bin/env python3
"""Byte-for-byte comparison of `tcuda rand` with torch on this GPU.

For sequences of calls after torch.cuda.manual_seed(seed), each torch call is
replayed by `tcuda rand --seed S --offset O`, with O read from
torch.cuda.get_rng_state() before the call; the bytes and the offset after the
call must both match. Exits 77 without torch or a GPU; prints
"rng-vs-torch: N cases, M identical" and exits 1 unless M == N.
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    print("SKIPPED: torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: torch sees no CUDA device")
    sys.exit(77)

CLI = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TCUDA_CLI", "tcuda")
DEV = "cuda"
DT = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool, "complex64": torch.complex64,
}
FLOATS = ["float32", "float64", "float16", "bfloat16"]
BIG = 2**24 + 3


def state_offset():
    s = bytes(torch.cuda.get_rng_state().tolist())
    return int.from_bytes(s[8:16], "little", signed=False)


def t_empty(n, dt):
    return torch.empty(n, dtype=DT[dt], device=DEV)


# Each op: (label, torch function of n, tcuda rand arguments)
def rand(dt):
    return (f"rand {dt}", lambda n: torch.rand(n, dtype=DT[dt], device=DEV), ["--dist", "uniform", "--dtype", dt])


def uniform(dt, a, b):
    return (f"uniform_({a},{b}) {dt}", lambda n: t_empty(n, dt).uniform_(a, b),
            ["--dist", "uniform", "--dtype", dt, "--from", repr(a), "--to", repr(b)])


def randn(dt):
    return (f"randn {dt}", lambda n: torch.randn(n, dtype=DT[dt], device=DEV), ["--dist", "normal", "--dtype", dt])


def normal(dt, m, s):
    return (f"normal_({m},{s}) {dt}", lambda n: t_empty(n, dt).normal_(m, s),
            ["--dist", "normal", "--dtype", dt, "--mean", repr(m), "--std", repr(s)])


def randint(dt, lo, hi):
    return (f"randint({lo},{hi}) {dt}", lambda n: torch.randint(lo, hi, (n,), dtype=DT[dt], device=DEV),
            ["--dist", "randint", "--dtype", dt, "--low", str(lo), "--high", str(hi)])


def random_(dt):
    return (f"random_() {dt}", lambda n: t_empty(n, dt).random_(), ["--dist", "random", "--dtype", dt])


def random_from(dt, lo):
    return (f"random_({lo}, None) {dt}", lambda n: t_empty(n, dt).random_(lo, None),
            ["--dist", "random", "--dtype", dt, "--low", str(lo)])


SEQUENCES = [
    (0, [(rand(dt), n) for dt in FLOATS for n in (1, 3, 255, 1000, 270337)]),
    (42, [(rand(dt), BIG) for dt in FLOATS]),
    (2**40 + 7, [(uniform(dt, -2.0, 3.0), n) for dt in FLOATS for n in (1000, 270337)]
     + [(uniform(dt, 0.1, 0.7), 270337) for dt in FLOATS]
     + [(uniform("float32", -2.0, 3.0), BIG)]),
    (1, [(randn(dt), n) for dt in FLOATS for n in (1, 1000, 270337)]
     + [(normal("float32", 0.3, 1.7), 270337), (normal("float64", 0.3, 1.7), 270337),
        (normal("float32", 0.3, 1.7), BIG), (randn("float64"), BIG), (randn("complex64"), 1001),
        (normal("bfloat16", 2.0, 3.0), 270337), (normal("float64", -1.0, 0.5), 4000037),
        (randn("float16"), 5), (randn("bfloat16"), 4000037)]),
    (7, [(randint("int64", 0, 1000), n) for n in (3, 270337)]
     + [(randint("int64", -5, 5), 1000), (randint("int64", 0, 2**30), 270337),
        (randint("int64", 0, 2**40), 270337), (randint("int32", 0, 1000), 270337),
        (randint("int32", 0, 2**30), 1000), (randint("int64", 0, 2**40), BIG),
        (randint("int32", -5, 5), BIG), (randint("uint8", 0, 256), 4097),
        (randint("float32", -1000, 1000), 1000)]),
    (2**63 + 5, [(random_(dt), n) for dt in ("int64", "int32", "float32", "float64") for n in (1000, 270337)]
     + [(random_(dt), 4097) for dt in ("int8", "int16", "uint8", "bool", "float16", "bfloat16")]
     + [(random_from("int16", -7), 1000), (random_from("int64", -2**63), 1000),
        (random_from("float32", -2**63), 1000), (random_("int64"), BIG)]),
]

# Over 2^31-1 bytes torch splits the fill in halves; one case checks that.
free, _ = torch.cuda.mem_get_info()
if free > 8 * 2**30 and os.environ.get("TCUDA_RNG_TORCH_SPLIT", "1") != "0":
    SEQUENCES.append((99, [(rand("float32"), 2**29 + 3)]))


def run_cli(seed, offset, args, n, out):
    cmd = [CLI, "rand", "--seed", str(seed), "--offset", str(offset), "-n", str(n), "--out", out, "--state"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()}"
    st = dict(kv.split("=") for kv in p.stderr.split())
    return int(st["offset"]), None


def main():
    t0 = time.time()
    cases = identical = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rand.bin")
        for seed, ops in SEQUENCES:
            torch.cuda.manual_seed(seed)
            for (label, fn, args), n in ops:
                off = state_offset()
                t = fn(n)
                torch.cuda.synchronize()
                off_after = state_offset()
                cases += 1
                got_off, err = run_cli(seed, off, args, n, out)
                what = f"seed={seed} offset={off} n={n} {label}"
                if err:
                    print(f"FAIL {what}: tcuda rand {err}")
                    continue
                if t.is_complex():
                    t = torch.view_as_real(t)
                want = t.contiguous().flatten().view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8, device=DEV)
                with open(out, "rb") as f:
                    data = f.read()
                if len(data) != want.numel():
                    print(f"FAIL {what}: {len(data)} bytes, torch has {want.numel()}")
                    continue
                got = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(DEV) if data else want.clone()
                same = torch.equal(got, want)
                if not same:
                    es = t.element_size()
                    diff = (got != want).nonzero()
                    first = int(diff[0]) // es
                    print(f"FAIL {what}: {int(diff.numel())} bytes differ, first at element {first}: "
                          f"tcuda {got[first*es:(first+1)*es].tolist()} torch {want[first*es:(first+1)*es].tolist()}")
                elif got_off != off_after:
                    print(f"FAIL {what}: offset after is {got_off}, torch's is {off_after}")
                else:
                    identical += 1
                del t, want, got
    print(f"rng-vs-torch: {cases} cases, {identical} identical ({time.time() - t0:.1f} s, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__})")
    return 0 if identical == cases else 1


if __name__ == "__main__":
    sys.exit(main())
