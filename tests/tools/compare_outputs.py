#!/usr/bin/env python3
"""Runs `tcuda replay` and `tcuda whatif --json` with two CLI binaries on
tests/data and diffs their outputs, wall-clock fields aside.

    compare_outputs.py BEFORE_TCUDA AFTER_TCUDA [--data DIR] [--keep DIR]

Cases:
  - every tests/data/torch/X.trace and tests/data/replay/*.trace on the
    simulator: with the recorded addresses (and maps, config, fraction) where
    the recording has them, with the driver model, with ascending addresses,
    and with --history (the written JSON snapshot compared too);
  - every snapshot in tests/data/whatif: `replay --simulate` under its own
    settings, under a given config, and with --history; `whatif --json`
    (default sweep), with --fraction, and with --config rows;
  - whatif on copies of tf_default.json with other allocator_settings
    (every key the snapshot reader maps, and bad values).
Exit status 0 when every case matches (the exit status and stderr of the two
runs included), 1 otherwise. Wall-clock fields (a history entry's time_us) are
dropped before comparing; everything else, figures derived from the
snapshot's own timestamps included, must be equal.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TIMING_KEYS = {"time_us"}  # wall clock at the moment of the replay


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def normalized(text):
    try:
        return json.dumps(strip(json.loads(text)), indent=1, sort_keys=True)
    except ValueError:
        return text  # not JSON (an error run): compared as it is


def run(cli, args, out_file=None):
    p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=600)
    extra = ""
    if out_file and os.path.exists(out_file):
        with open(out_file) as f:
            extra = normalized(f.read())
        os.remove(out_file)
    # stderr names the binary's argv[0] nowhere today; drop it anyway
    err = p.stderr.replace(cli, "tcuda")
    return p.returncode, normalized(p.stdout), err, extra


def first_difference(a, b):
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return "line %d: before %r, after %r" % (i + 1, x[:200], y[:200])
    return "lengths differ (%d and %d lines)" % (len(la), len(lb))


def cases(data):
    torch = os.path.join(data, "torch")
    traces = sorted(os.path.join(torch, f) for f in os.listdir(torch) if f.endswith(".trace"))
    rdir = os.path.join(data, "replay")
    if os.path.isdir(rdir):
        traces += sorted(os.path.join(rdir, f) for f in os.listdir(rdir) if f.endswith(".trace"))
    for tr in traces:
        base = tr[: -len(".trace")]
        name = os.path.basename(base)
        opts = []
        if os.path.exists(base + ".config"):
            opts += ["--config", open(base + ".config").read().strip()]
        if os.path.exists(base + ".fraction"):
            opts += ["--fraction", open(base + ".fraction").read().strip()]
        if os.path.exists(base + ".addresses"):
            rec = ["--addresses", base + ".addresses"]
            if os.path.exists(base + ".maps"):
                rec += ["--maps", base + ".maps"]
            yield "replay recorded " + name, ["replay", "--simulate"] + rec + opts + [tr], False
        yield "replay driver " + name, ["replay", "--simulate", "--va", "driver"] + opts + [tr], False
        yield "replay ascending " + name, ["replay", "--simulate", "--va", "ascending"] + opts + [tr], False
        yield "replay history " + name, ["replay", "--simulate"] + opts + ["--history", "@OUT@", tr], True
    wdir = os.path.join(data, "whatif")
    snaps = sorted(os.path.join(wdir, f) for f in os.listdir(wdir) if f.endswith((".pickle", ".json"))
                   and not f.endswith(".stats.json"))
    for sp in snaps:
        name = os.path.basename(sp)
        yield "replay snapshot " + name, ["replay", "--simulate", sp], False
        yield "replay snapshot config " + name, ["replay", "--simulate", "--config",
                                                 "expandable_segments:True", sp], False
        yield "replay snapshot history " + name, ["replay", "--simulate", "--history", "@OUT@", sp], True
        yield "whatif " + name, ["whatif", "--json", sp], False
        yield "whatif fraction " + name, ["whatif", "--json", "--fraction", "0.004", sp], False
        yield "whatif configs " + name, ["whatif", "--json", "--config", "max_split_size_mb:128",
                                         "--config", "garbage_collection_threshold:0.7,max_split_size_mb:64",
                                         "--capacity", "8GiB", sp], False


# allocator_settings variants written into a copy of a JSON snapshot: every
# key the reader maps, the older plain-number divisions, and bad values
SETTINGS = {
    "msplit": {"max_split_size": 128 << 20},
    "msplit_bad": {"max_split_size": (128 << 20) + 1},
    "msplit_unset": {"max_split_size": -1},
    "gc": {"garbage_collection_threshold": 0.75},
    "bools": {"expandable_segments": True, "release_lock_on_cudamalloc": True,
              "pinned_use_cuda_host_register": True, "pinned_num_register_threads": 8},
    "rp2_dict": {"roundup_power2_divisions": {"1": 0, "256": 4, "512": 2, "32768": 8, "65536": 3}},
    "rp2_int": {"roundup_power2_divisions": 4},
    "rp2_bad": {"roundup_power2_divisions": {"3": 1}},
    "all": {"max_split_size": 256 << 20, "garbage_collection_threshold": 0.5, "expandable_segments": True,
            "roundup_power2_divisions": {"1": 2}},
    "not_a_dict": None,
}


def settings_cases(data, tmp):
    src = os.path.join(data, "whatif", "tf_default.json")
    if not os.path.exists(src):
        return
    with open(src) as f:
        doc = json.load(f)
    for name, extra in sorted(SETTINGS.items()):
        d = dict(doc)
        if extra is None:
            d["allocator_settings"] = [1, 2]
        else:
            d["allocator_settings"] = dict(doc["allocator_settings"], **extra)
        path = os.path.join(tmp, "settings_%s.json" % name)
        with open(path, "w") as f:
            json.dump(d, f)
        yield "whatif settings " + name, ["whatif", "--json", "--config", "max_split_size_mb:64", path], False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "data"))
    a = ap.parse_args()
    n = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "history.json")
        for name, args, has_out in list(cases(a.data)) + list(settings_cases(a.data, tmp)):
            args = [out if x == "@OUT@" else x for x in args]
            r0 = run(a.before, args, out if has_out else None)
            r1 = run(a.after, args, out if has_out else None)
            n += 1
            what = ("exit status", "stdout", "stderr", "history file")
            diffs = [(w, x, y) for w, x, y in zip(what, r0, r1) if x != y]
            if not diffs:
                print("same %s (exit %d)" % (name, r0[0]))
                continue
            bad += 1
            for w, x, y in diffs:
                detail = first_difference(x, y) if isinstance(x, str) else "%r vs %r" % (x, y)
                print("DIFF %s: %s: %s" % (name, w, detail))
    print("%d case(s), %d differ" % (n, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
