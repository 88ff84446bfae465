#!/usr/bin/env python3
"""Cold start of torch, measured as bench_coldstart measures tcuda.

The parent reads CLOCK_MONOTONIC just before it starts a fresh interpreter;
the child prints its own CLOCK_MONOTONIC once ready; the parent subtracts.
Roles, alternated:
  torch   import torch; torch.cuda.init(); torch.empty(1, device="cuda")
  python  the bare interpreter (python3 -c with only the clock read), so the
          torch time can be split into interpreter start and the rest
  import  import torch alone (fewer repetitions)
COLDSTART_REPS sets the repetitions (default 10). Without torch or a GPU it
prints SKIPPED and exits 0. Prints RESULT lines (format: bench/run-gpu).
"""
import os
import statistics
import subprocess
import sys
import time

READY = ("import time,sys,os;"
         "sys.stdout.write('READY %d\\n' % time.clock_gettime_ns(time.CLOCK_MONOTONIC));"
         "sys.stdout.flush();os._exit(0)")
ROLES = {
    "torch": "import torch;torch.cuda.init();torch.empty(1, device='cuda');" + READY,
    "python": READY,
    "import": "import torch;" + READY,
}


def once(role):
    """Milliseconds from spawn to READY, or None (with the child's stderr)."""
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    p = subprocess.Popen([sys.executable, "-c", ROLES[role]], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, "timeout"
    for line in out.splitlines():
        if line.startswith("READY "):
            return (int(line.split()[1]) - t0) / 1e6, ""
    return None, (err.strip().splitlines() or ["exit %d" % p.returncode])[-1]


def main():
    reps = int(os.environ.get("COLDSTART_REPS", "10") or 10)
    warm, why = once("torch")  # also warms the page cache
    if warm is None:
        print("SKIPPED coldstart_torch.py: torch with CUDA not usable here (%s)" % why)
        return 0
    once("python")
    times = {"torch": [], "python": [], "import": []}
    for i in range(reps):
        order = ["torch", "python"] if i % 2 == 0 else ["python", "torch"]
        if i < max(3, reps // 2):
            order.append("import")
        for role in order:
            v, why = once(role)
            if v is None:
                print("coldstart_torch: %s run failed: %s" % (role, why))
            else:
                times[role].append(v)
    for role, v in times.items():
        if v:
            print("coldstart_torch: %-6s n=%d median %.2f ms, min %.2f ms, max %.2f ms"
                  % (role, len(v), statistics.median(v), min(v), max(v)))

    def fmt(v):
        return "%.2f" % v if v is not None else "NA"

    med = {k: (statistics.median(v) if v else None) for k, v in times.items()}
    low = {k: (min(v) if v else None) for k, v in times.items()}
    print("RESULT name=coldstart metric=start_to_first_alloc_median torch=%s unit=ms" % fmt(med["torch"]))
    print("RESULT name=coldstart metric=start_to_first_alloc_min torch=%s unit=ms" % fmt(low["torch"]))
    print("RESULT name=coldstart metric=python_start_median torch=%s unit=ms" % fmt(med["python"]))
    print("RESULT name=coldstart metric=import_torch_median torch=%s unit=ms" % fmt(med["import"]))
    if med["torch"] is not None and med["python"] is not None:
        print("RESULT name=coldstart metric=torch_minus_python_start_median torch=%s unit=ms"
              % fmt(med["torch"] - med["python"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
