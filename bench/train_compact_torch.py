#!/usr/bin/env python3
"""The compact policy in a PyTorch training loop (tests/python/train_compact.py):
torch's allocator, tcuda's torch-identical policy and TCUDA_ALLOC_CONF=
policy:compact run the same loop, each in its own process. RESULT lines
(format: bench/run-gpu):

  train_compact step_ms             compact's median step time; ref torch's
                                    (target <=ref*1.05)
  train_compact physical_peak       compact's peak device memory in use
                                    (cudaMemGetInfo, over the loop's
                                    baseline); ref torch's peak allocated
                                    (target: the larger of ref*1.10 and
                                    ref + 4 MiB)
  train_compact step_ms_torch_policy, physical_peak_torch_policy,
  peak_reserved_torch_policy, peak_reserved
                                    the same figures for tcuda's
                                    torch-identical policy, and tcuda's own
                                    peak reserved (compact counts mapped
                                    pages), against torch's: for the notes
  train_compact losses_equal        1 when compact's losses are the
                                    torch-identical policy's bit for bit

Exit 1 when a run fails or the losses differ. Without torch or a GPU it
prints SKIPPED and exits 0. libtcuda: TCUDA_LIBRARY, else
TCUDA_BINARY_DIR/src/libtcuda.so (bench/run-gpu sets TCUDA_BINARY_DIR to its
BUILD_DIR), else the tcuda package's own search. TRAIN_COMPACT_CYCLES sets
the measured cycles per run (default 12), TRAIN_COMPACT_ROUNDS how many
times the three runs go, in alternating order (default 3); step times are
the median over rounds.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch here
        print("SKIPPED train_compact: cannot import torch (%s)" % e)
        return 0
    # no CUDA context is made here; and each run's baseline is taken in its
    # own process, so whatever this one holds cancels out
    if not torch.cuda.is_available():
        print("SKIPPED train_compact: no GPU")
        return 0
    build = os.environ.get("TCUDA_BINARY_DIR")
    if not os.environ.get("TCUDA_LIBRARY") and build and os.path.exists(os.path.join(build, "src", "libtcuda.so")):
        os.environ["TCUDA_LIBRARY"] = os.path.join(build, "src", "libtcuda.so")
    # the runs are child processes: they find the package and libtcuda here
    pp = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + (os.pathsep + pp if pp else "")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import train_compact as tc

    cycles = int(os.environ.get("TRAIN_COMPACT_CYCLES", "12") or 12)
    rounds = int(os.environ.get("TRAIN_COMPACT_ROUNDS", "3") or 3)
    res, fail = tc.measure(cycles, rounds)
    print(tc.report(res))
    a, b, c = (res.get(m) for m in tc.MODES)
    if a and c:
        pa = a["peak_allocated"]
        if 1.10 * pa >= pa + 4 * MIB:
            target = "<=ref*1.10 (the compact policy's bound: max(1.10 x torch's peak allocated, +4 MiB))"
        else:
            target = "<=ref+%d (the compact policy's bound: max(1.10 x torch's peak allocated, +4 MiB))" % (4 * MIB)
        print("RESULT name=train_compact metric=step_ms tcuda=%.4f ref_name=torch ref=%.4f unit=ms target=<=ref*1.05"
              % (c["step_ms"], a["step_ms"]))
        print("RESULT name=train_compact metric=physical_peak tcuda=%d ref_name=torch ref=%d unit=bytes target=%s"
              % (c["physical_peak"], pa, target))
        print("RESULT name=train_compact metric=peak_reserved tcuda=%d ref_name=torch ref=%d unit=bytes "
              "target=for the notes (compact: mapped pages)" % (c["peak_reserved"], a["peak_reserved"]))
    if a and b:
        print("RESULT name=train_compact metric=step_ms_torch_policy tcuda=%.4f ref_name=torch ref=%.4f unit=ms "
              "target=for the notes" % (b["step_ms"], a["step_ms"]))
        print("RESULT name=train_compact metric=physical_peak_torch_policy tcuda=%d ref_name=torch ref=%d unit=bytes "
              "target=for the notes (ref: torch's physical peak)" % (b["physical_peak"], a["physical_peak"]))
        print("RESULT name=train_compact metric=peak_reserved_torch_policy tcuda=%d ref_name=torch ref=%d unit=bytes "
              "target=for the notes" % (b["peak_reserved"], a["peak_reserved"]))
    if b and c:
        same = c["losses"] == b["losses"] and len(b["losses"]) > 0
        print("RESULT name=train_compact metric=losses_equal tcuda=%d ref_name=- ref=NA unit=bool target===1"
              % same)
        if not same:
            fail += [f for f in tc.check(res) if f.startswith("losses")]
    for f in fail:
        print("FAIL:", f)
    return 1 if fail else 0


if __name__ == "__main__":
    raise SystemExit(main())
