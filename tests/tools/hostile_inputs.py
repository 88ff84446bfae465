#!/usr/bin/env python3
"""Crafted hostile inputs for the snapshot readers and the CLI front ends
(tests/unit/hostile_readers.sh): each case writes its file at test time,
runs the CLI on it, and checks the exit status, a bound on wall time, a
bound on the child's peak RSS (os.wait4's ru_maxrss) and the error text.

A hostile snapshot must cost no more than its size: the bounds are far
below what the same files cost without the fixes (seconds to minutes,
GiBs), and far above what they cost with them.

  hostile_inputs.py --cli PATH --dir DIR [--list] [CASE...]

Exit 0 when every case passes, 1 otherwise; a case that cannot run here
(an rlimit the sanitizers refuse, say) says SKIP.
"""
import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import threading
import time


# ---- pickle opcodes (protocol 4), written by hand: no object is pickled ----

def p_str(s):
    b = s.encode("utf-8", "surrogatepass")
    if len(b) < 256:
        return b"\x8c" + bytes([len(b)]) + b
    return b"X" + struct.pack("<I", len(b)) + b


def p_int(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + struct.pack("<H", v)
    if -2**31 <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def p_get(i):
    return b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)


def p_dict(pairs):
    """pairs: (key bytes, value bytes) already encoded"""
    out = [b"}("]
    for k, v in pairs:
        out += [k, v]
    out.append(b"u")
    return b"".join(out)


def snapshot_pickle(entries, segments=b"]"):
    """{'device_traces': [[entries...]], 'segments': SEGMENTS}; entries is the
    encoded body of the inner list (values between MARK and APPENDS)."""
    return b"".join([b"\x80\x04}(", p_str("device_traces"), b"]](", entries, b"ea",
                     p_str("segments"), segments, b"u."])


# ---- the files ----

def dict_shared(path):
    """One entry dict of many keys (an unknown action, so the conversion only
    looks its fields up), memoized and referenced again for 2 bytes each: a
    reader that scans the dict on every lookup costs keys x references."""
    keys, refs = 20000, 100000
    pairs = [(p_str("action"), p_str("x")), (p_str("addr"), p_int(0)), (p_str("size"), p_int(0))]
    pairs += [(p_str("k%05d" % i), b"N") for i in range(keys)]
    body = p_dict(pairs) + b"\x94" + p_get(0) * (refs - 1)
    data = snapshot_pickle(body)
    open(path, "wb").write(data)
    return len(data)


def json_snapshot(entries):
    return {"device_traces": [entries], "segments": []}


def nul_action(path, name):
    doc = json_snapshot([{"action": name, "addr": 1 << 20, "size": 512, "stream": 0}])
    open(path, "w").write(json.dumps(doc))


def memo_fanout(path):
    """A list of many memo references to one small dict: the reader's work
    counts each reference."""
    body = p_dict([(p_str("action"), p_str("x")), (p_str("addr"), p_int(0)), (p_str("size"), p_int(0))])
    body += b"\x94" + p_get(0) * 20000
    open(path, "wb").write(snapshot_pickle(body))


def bom_json(path):
    doc = json_snapshot([{"action": "alloc", "addr": 1 << 21, "size": 512, "stream": 0},
                         {"action": "free_completed", "addr": 1 << 21, "size": 512, "stream": 0}])
    open(path, "wb").write(b"\xef\xbb\xbf" + json.dumps(doc).encode())


def sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)


# ---- running ----

class Case:
    def __init__(self, name, argv, rc, text, seconds, rss_mb, setup=None, rlimit_as=None, check=None):
        # rc: the exit status; text: a part of stderr (None: any); seconds, rss_mb: the bounds
        self.name, self.argv, self.rc, self.text = name, argv, rc, text
        self.seconds, self.rss_mb, self.setup, self.rlimit_as, self.check = seconds, rss_mb, setup, rlimit_as, check


def run_child(argv, out_path, rlimit_as=None, timeout=120):
    """(exit status or None when killed at the timeout, stderr, seconds, peak RSS in KiB)"""
    def limit():
        if rlimit_as:
            resource.setrlimit(resource.RLIMIT_AS, (rlimit_as, rlimit_as))
    err_path = out_path + ".err"
    t0 = time.monotonic()
    with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
        p = subprocess.Popen(argv, stdout=fo, stderr=fe, preexec_fn=limit)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)  # this child's own usage, not a maximum over all
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    err = open(err_path, "rb").read().decode("utf-8", "replace")
    rc = None if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 else p.returncode
    return rc, err, wall, ru.ru_maxrss


def cases(cli, d):
    f = lambda name: os.path.join(d, name)
    cs = [
        # item 4: lookups in a dict shared through the memo
        Case("dict_shared_replay", [cli, "replay", "--simulate", f("dict_shared.pickle")], 0, None, 1.5, 200,
             setup=lambda: dict_shared(f("dict_shared.pickle"))),
        Case("dict_shared_whatif", [cli, "whatif", "--config", "", "--json", f("dict_shared.pickle")], 0, None,
             1.5, 200, setup=lambda: dict_shared(f("dict_shared.pickle"))),
        # item 6: an input size cap, and a read that fails cleanly when memory runs out
        Case("devzero_whatif", [cli, "whatif", "--max-input", "16MiB", "/dev/zero"], 1,
             "tcuda whatif: tcuda_whatif_file: /dev/zero: larger than the input cap of 16777216 bytes", 2, 100),
        Case("devzero_replay", [cli, "replay", "--simulate", "--max-input", "16MiB", "/dev/zero"], 1,
             "tcuda_replay_file_to: /dev/zero: larger than the input cap of 16777216 bytes", 2, 100),
        Case("devzero_viz", [cli, "viz", "--max-input", "16MiB", "/dev/zero"], 1,
             "tcuda viz: '/dev/zero': larger than the input cap of 16777216 bytes", 2, 100),
        Case("default_cap", [cli, "whatif", f("sparse_big")], 1,
             "larger than the input cap of 1073741824 bytes (max_input_bytes, --max-input raises it)", 2, 100,
             setup=lambda: sparse(f("sparse_big"), (1 << 30) + 1)),
        Case("devzero_no_memory", [cli, "whatif", "--max-input", "64GiB", "/dev/zero"], 1,
             "tcuda_whatif_file: /dev/zero: host out of memory reading the file", 20, 1100, rlimit_as=1 << 30),
        # item 13: messages name the file
        Case("empty_named", [cli, "whatif", f("empty.pickle")], 1,
             "tcuda whatif: tcuda_whatif_file: %s: the file is empty" % f("empty.pickle"), 2, 100,
             setup=lambda: open(f("empty.pickle"), "wb").close()),
        Case("truncated_named", [cli, "replay", "--simulate", f("trunc.pickle")], 1,
             "tcuda_replay_snapshot_to: %s: pickle truncated" % f("trunc.pickle"), 2, 100,
             setup=lambda: open(f("trunc.pickle"), "wb").write(b"\x80\x04}\x8c\x05abc")),
    ]
    return cs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    all_cases = cases(a.cli, a.dir)
    if a.list:
        print("\n".join(c.name for c in all_cases))
        return 0
    todo = [c for c in all_cases if not a.names or c.name in a.names]
    if a.names and len(todo) != len(a.names):
        print("unknown case in %s" % a.names)
        return 2
    failed = 0
    for c in todo:
        if c.setup:
            c.setup()
        out_path = os.path.join(a.dir, c.name + ".out")
        if c.rlimit_as:
            rc0, _, _, _ = run_child([a.cli, "--help"], out_path, rlimit_as=c.rlimit_as, timeout=30)
            if rc0 != 0:
                print("SKIP %s: the CLI does not start under RLIMIT_AS=%d (a sanitizer build?)" % (c.name, c.rlimit_as))
                continue
        rc, err, wall, rss_kb = run_child(c.argv, out_path, rlimit_as=c.rlimit_as, timeout=max(30, 20 * c.seconds))
        problems = []
        if rc is None:
            problems.append("killed after %.1f s" % wall)
        elif rc != c.rc:
            problems.append("exit %d, want %d" % (rc, c.rc))
        if wall > c.seconds:
            problems.append("took %.2f s, bound %.2f s" % (wall, c.seconds))
        if rss_kb > c.rss_mb * 1024:
            problems.append("peak RSS %d MiB, bound %d MiB" % (rss_kb // 1024, c.rss_mb))
        if c.text and c.text not in err:
            problems.append("stderr lacks %r" % c.text)
        if c.check and rc == c.rc:
            why = c.check(open(out_path, "rb").read().decode("utf-8", "replace"))
            if why:
                problems.append(why)
        os.unlink(out_path)
        if problems:
            failed += 1
            print("FAIL %s: %s; stderr: %s" % (c.name, "; ".join(problems), err[:400].strip()))
        else:
            print("ok %s: %.2f s, %d MiB" % (c.name, wall, rss_kb // 1024))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
