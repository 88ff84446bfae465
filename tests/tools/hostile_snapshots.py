#!/usr/bin/env python3
"""Crafted PyTorch memory snapshots that once cost far more than their size,
written at test time, and a runner that feeds each to the CLI.

Usage: hostile_snapshots.py TCUDA_CLI [CASE ...]     run the cases (all by default)
       hostile_snapshots.py --write DIR              only write the files

Each case is a small pickle that shares objects through the pickle memo
(one object, referenced again for 2 bytes), so a reader that processes every
reference as separate data does work far beyond the file's size. The runner
checks, per case, the exit status, a phrase of the message (or of the
answer), the wall time and the child's peak resident memory (polled from
/proc while it runs, then its rusage); a child past a bound is killed and
the case fails. Prints one line per case and exits 1 if any failed.
"""
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
GIB = 1 << 30
BASE = 0x7F0000000000  # where the crafted segments live


def settings(expandable=False):
    return {"max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "release_lock_on_cudamalloc": False, "pinned_use_host_register": False,
            "roundup_power2_divisions": {}}


def snapshot(entries, segments=(), expandable=False):
    return {"segments": list(segments), "device_traces": [list(entries)],
            "allocator_settings": settings(expandable), "external_annotations": []}


def ent(action, addr, size, stream=0, frames=None, t=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
            "frames": frames if frames is not None else []}


def segment(addr, size, blocks, pool=(0, 0), stream=0, expandable=False):
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": 0, "active_size": 0,
            "requested_size": 0, "stream": stream, "segment_type": "large", "segment_pool_id": pool,
            "is_expandable": expandable, "frames": [], "blocks": blocks}


def block(addr, size, state="active_allocated"):
    b = {"size": size, "requested_size": size, "state": state, "frames": []}
    if addr is not None:
        b["address"] = addr
    return b


def dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)
    return os.path.getsize(path)


# ---- the cases: name -> (writer, CLI arguments after the file, checks) ----

def frames_shared(path):
    """One frames list of 64 frames with long names, shared by every
    request: rendering each request's frames costs 64 frames per 2 bytes."""
    frame = {"name": "f" * 4000, "filename": "x.py", "line": 1}
    frames = [frame] * 64
    e = ent("alloc", BASE, 8 * GIB, frames=frames)  # over the device given: every request fails
    dump(path, snapshot([e] * 30000))


def frames_nul(path):
    """A frame name holding a NUL byte (Python strings may): shown whole."""
    frames = [{"name": "run\x00step", "filename": "train.py", "line": 7}]
    dump(path, snapshot([ent("alloc", BASE, 8 * GIB, frames=frames)]))


def first_oom_frame_nul(out):
    fr = json.loads(out)["configs"][0]["first_oom"]["frames"]
    return None if fr and fr[0]["name"] == "run\x00step" else "the frame's name is %r" % (fr and fr[0]["name"])


def segments_shared(path):
    """One segment listed many times, its blocks list naming one
    block many times."""
    blk = block(BASE, 2 * MIB)
    seg = segment(BASE, 20 * MIB, [blk] * 2000)
    dump(path, snapshot([ent("free_requested", BASE + 4 * MIB, 512)], [seg] * 2000))


def segment_frees_repeated(path):
    """Many segments that an inferred empty_cache frees, then one
    segment_free entry repeated a million times: each was matched against
    every free the replay had made (and the list of them grew by one)."""
    n, entries = 40000, []
    for k in range(n):
        a = BASE + k * 16 * MIB
        entries += [{"action": "segment_alloc", "addr": a, "size": 12 * MIB},
                    {"action": "alloc", "addr": a, "size": 12 * MIB}]
    for k in range(n):
        entries.append({"action": "free_requested", "addr": BASE + k * 16 * MIB, "size": 12 * MIB})
    far = BASE + (n + 8) * 16 * MIB
    entries += [{"action": "segment_free", "addr": far, "size": 12 * MIB},
                {"action": "alloc", "addr": far + 32 * MIB, "size": 512}]
    entries += [{"action": "segment_free", "addr": far + 64 * MIB, "size": 12 * MIB}] * 1000000
    entries.append({"action": "alloc", "addr": far + 96 * MIB, "size": 512})
    dump(path, snapshot(entries))


def blocks_list_shared(path):
    """Many segments sharing one blocks list whose blocks carry no address
    (each then starts where the one before ended): every segment got a
    copy of every block, M times B for the price of M segments."""
    blocks = [block(None, 512)] * 5000
    dump(path, snapshot([ent("free_requested", BASE, 512)],
                        [segment(BASE + k * 4 * MIB, 4 * MIB, blocks) for k in range(2000)]))


def blocks_dup(path):
    """One segment whose blocks list names the same block twice."""
    blk = block(BASE, 2 * MIB)
    dump(path, snapshot([], [segment(BASE, 20 * MIB, [blk, blk])]))


def segments_overlap(path):
    """Segments that overlap, each full of live blocks: 46 MB live
    once became 139 GiB in the expandable rows."""
    segs = []
    for k in range(24):
        a = BASE + k * 2 * MIB  # each starts inside the one before
        segs.append(segment(a, 20 * MIB, [block(a, 2 * MIB)]))
    dump(path, snapshot([], segs))


def block_outside(path):
    """A block that lies past its segment's end."""
    dump(path, snapshot([], [segment(BASE, 20 * MIB, [block(BASE + 30 * MIB, 2 * MIB)])]))


def pool_segments(path):
    """Many segments of a graph's private pool, each with a live block,
    and a request into each: routing each request through every pool
    segment was quadratic, and so was rebuilding the segments at the start
    (the simulated driver looked through every live segment for each).
    The dicts carry only the fields the reader needs, to keep the file
    small."""
    n = 48000
    pool, segs, entries = (1, 1), [], []
    for k in range(n):
        a = BASE + k * 2 * MIB
        segs.append({"address": a, "total_size": 2 * MIB, "segment_type": "small", "segment_pool_id": pool,
                     "blocks": [{"address": a, "size": 512, "state": "active_allocated"}]})
        entries += [{"action": "alloc", "addr": a + MIB, "size": 512},
                    {"action": "free_requested", "addr": a + MIB, "size": 512},
                    {"action": "free_completed", "addr": a + MIB, "size": 512}]
    dump(path, snapshot(entries, segs))


def replay_output(path):
    """Many live blocks, then a 'snapshot' entry referenced many
    times: replay --simulate printed every block at each."""
    entries = [ent("alloc", BASE + k * 2 * MIB, 2 * MIB) for k in range(2000)]
    snap = {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 0, "frames": []}
    dump(path, snapshot(entries + [snap] * 5000))


def start_too_big(path):
    """A truncated history whose starting state (6 GiB live) does
    not fit the 4 GiB device it is run on."""
    segs = [segment(BASE + k * GIB, GIB, [block(BASE + k * GIB, GIB)]) for k in range(6)]
    entries = [ent("alloc", BASE + 8 * GIB, 2 * MIB), ent("free_requested", BASE + 8 * GIB, 2 * MIB),
               ent("free_completed", BASE + 8 * GIB, 2 * MIB)]
    dump(path, snapshot(entries, segs))


def marker_stream(path, stream):
    """A record_stream free on `stream`: the block returns at its
    free_completed, whatever the stream's value (-15 was the replay's own
    marker)."""
    a, b = BASE, BASE + 64 * MIB
    entries = [ent("alloc", a, 40 * MIB, stream=stream), ent("free_requested", a, 40 * MIB, stream=stream),
               ent("alloc", b, 40 * MIB, stream=stream), ent("free_completed", a, 40 * MIB, stream=stream),
               ent("free_requested", b, 40 * MIB, stream=stream), ent("free_completed", b, 40 * MIB, stream=stream)]
    dump(path, snapshot(entries))


def replay_output_small(path):
    """The same, smaller: within a raised work budget it is answered."""
    entries = [ent("alloc", BASE + k * 2 * MIB, 2 * MIB) for k in range(200)]
    snap = {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 0, "frames": []}
    dump(path, snapshot(entries + [snap] * 1000))


def pending_reverse(path):
    """Many record_stream frees pending at once and completed in reverse
    order, an allocation between each: torch's order then puts each on a
    stream of its own in the replay, and every allocation looked at every
    pending free (quadratic). Distinct addresses, so nothing is shared."""
    n = 60000
    live = [BASE + k * 512 for k in range(n)]
    entries = [{"action": "alloc", "addr": a, "size": 512} for a in live]
    entries += [{"action": "free_requested", "addr": a, "size": 512} for a in live]
    for k, a in enumerate(reversed(live)):
        entries += [{"action": "alloc", "addr": BASE + GIB + k * 512, "size": 512},
                    {"action": "free_completed", "addr": a, "size": 512}]
    dump(path, snapshot(entries))


class Case:
    def __init__(self, name, writer, args, rc, text, secs, rss_mib, stdout_max=None, check=None):
        self.name, self.writer, self.args, self.rc, self.text = name, writer, args, rc, text
        self.secs, self.rss_mib, self.stdout_max, self.check = secs, rss_mib, stdout_max, check


def first_oom_frames_capped(out):
    doc = json.loads(out)
    fr = doc["configs"][0]["first_oom"]["frames"]
    if len(fr) != 64:
        return "first_oom has %d frames, want 64" % len(fr)
    if not 0 < len(fr[0]["name"]) <= 300:
        return "a frame's name is %d bytes long, want it capped" % len(fr[0]["name"])
    return None


CASES = [
    Case("frames_shared", frames_shared, ["whatif", "--json", "--capacity", "4GiB", "--config", ""], 0, None,
         20, 300, check=first_oom_frames_capped),
    Case("frames_nul", frames_nul, ["whatif", "--json", "--capacity", "4GiB", "--config", ""], 0, None, 10, 200,
         check=first_oom_frame_nul),
    Case("segments_shared", segments_shared, ["whatif"], 1,
         r"segment at 0x7f0000000000 .*listed twice", 10, 200),
    Case("segment_frees_repeated", segment_frees_repeated, ["replay", "--simulate", "--capacity", "1TiB"], 0,
         None, 10, 300),
    Case("blocks_list_shared", blocks_list_shared, ["whatif"], 1, r"needs more work than its budget", 10, 200),
    Case("blocks_dup", blocks_dup, ["whatif"], 1, r"block at 0x7f0000000000 .*listed twice", 10, 200),
    Case("segments_overlap", segments_overlap, ["whatif"], 1,
         r"segment at 0x7f0000200000 .*overlaps", 10, 200),
    Case("block_outside", block_outside, ["whatif"], 1, r"block at 0x7f0001e00000 .*outside its segment", 10, 200),
    Case("pool_segments", pool_segments, ["whatif", "--config", "", "--threads", "2"], 0, None, 30, 400),
    Case("replay_output", replay_output, ["replay", "--simulate"], 1,
         r"the replay's output: the input needs more work than its budget of \d+ units", 20, 300,
         stdout_max=64 * MIB),
    Case("replay_output_budget", replay_output_small, ["replay", "--simulate"], 1,
         r"the replay's output: the input needs more work than its budget", 20, 300, stdout_max=64 * MIB),
    Case("replay_output_raised", replay_output_small, ["replay", "--simulate", "--work-budget", "200000000"], 0,
         None, 30, 300, check=lambda out: None if out.endswith("]\n") else "the output is not a whole array"),
    Case("start_too_big", start_too_big, ["whatif", "--capacity", "4GiB"], 1,
         r"does not fit", 20, 300),
    Case("start_too_big_limit", start_too_big, ["whatif", "--fraction", "0.02"], 1,
         r"does not fit: its live blocks hold 6442450944 bytes, over the limit", 20, 300),
    Case("start_too_big_replay", start_too_big, ["replay", "--simulate", "--capacity", "4GiB"], 1,
         r"does not fit", 20, 300),
    Case("pending_reverse", pending_reverse, ["replay", "--simulate"], 1,
         r"checked pending record_stream frees more often than the input's work budget", 8, 400),
]


def write_all(d):
    written = {}
    for c in CASES:
        p = os.path.join(d, c.writer.__name__ + ".pickle")
        if p not in written:
            c.writer(p)
            written[p] = 1
    for s in (-15, 7):
        marker_stream(os.path.join(d, "stream%d.pickle" % s), s)


def peak_rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def sanitized(cli):
    """A sanitizer build (scripts/test) runs several times slower and holds
    shadow memory: its bounds are scaled, and ASan's quarantine kept small."""
    with open(cli, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


SLOW = 1


def run(cli, args, secs, rss_mib, stdout_max=None):
    """(rc, stdout, stderr, wall seconds, peak RSS in MiB, why it was killed or None)"""
    secs, rss_mib = secs * SLOW, rss_mib * SLOW
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "quarantine_size_mb=8:thread_local_quarantine_size_kb=64:" + env.get("ASAN_OPTIONS", "")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen([cli] + args, stdout=out, stderr=err, env=env)
        killed, peak = None, 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, peak_rss_kib(p.pid))
            if time.monotonic() - t0 > secs:
                killed = "over %d s" % secs
            elif peak > rss_mib * 1024:
                killed = "over %d MiB" % rss_mib
            elif stdout_max and os.fstat(out.fileno()).st_size > stdout_max:
                killed = "stdout over %d bytes" % stdout_max
            if killed:
                p.send_signal(signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        peak = max(peak, ru.ru_maxrss)
        out.seek(0)
        err.seek(0)
        size = os.fstat(out.fileno()).st_size
        out.seek(max(0, size - (1 << 22)))  # the whole output, or its last 4 MiB
        so = out.read().decode("utf-8", "replace")
        return p.returncode, so, err.read().decode("utf-8", "replace"), wall, peak / 1024, killed


def check_case(cli, d, c):
    path = os.path.join(d, c.writer.__name__ + ".pickle")
    args = c.args[:1] + [path] + c.args[1:]
    rc, out, err, wall, rss, killed = run(cli, args, c.secs, c.rss_mib, c.stdout_max)
    fig = "%.1f s, %.0f MiB, %d bytes" % (wall, rss, os.path.getsize(path))
    if killed:
        return "killed (%s): %s" % (killed, fig)
    if rc != c.rc:
        return "exit %d, want %d: %s (%s)" % (rc, c.rc, err.strip()[-300:], fig)
    if c.text:
        lines = [l for l in err.splitlines() if l.startswith("tcuda ")]
        if not any(re.search(c.text, l) for l in lines):
            return "no message matching %r: %s" % (c.text, err.strip()[-300:])
        if c.rc and os.path.basename(path) not in err:
            return "the message does not name the file: %s" % err.strip()[-300:]
    if c.check:
        why = c.check(out)
        if why:
            return why
    return "ok: " + fig


def check_marker(cli, d):
    """the same history on stream -15 and on stream 7 gives one answer."""
    peaks = []
    for s in (-15, 7):
        rc, out, err, wall, rss, killed = run(cli, ["whatif", "--json", "--config", "",
                                                    os.path.join(d, "stream%d.pickle" % s)], 20, 300)
        if rc or killed:
            return "stream %d: exit %d %s: %s" % (s, rc, killed or "", err.strip()[-300:])
        r = json.loads(out)["configs"][0]
        peaks.append((r["peak_reserved"], r["peak_allocated"]))
    if peaks[0] != peaks[1]:
        return "stream -15 gives peaks %s, stream 7 gives %s" % (peaks[0], peaks[1])
    if peaks[0][0] != 80 * MIB:
        return "peak reserved %d, want two segments: the first block is cached only at its free_completed (%d)" % (
            peaks[0][0], 80 * MIB)
    return "ok"


def main(argv):
    if len(argv) == 3 and argv[1] == "--write":
        write_all(argv[2])
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cli, only = argv[1], set(argv[2:])
    global SLOW
    if sanitized(cli):
        SLOW = 10
        print("a sanitizer build: time and memory bounds are 10 times wider")
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        # written by a child, so that this process stays small: a child of
        # it counts the pages it shares from the fork in its peak
        subprocess.run([sys.executable, os.path.abspath(__file__), "--write", d], check=True)
        results = [(c.name, lambda c=c: check_case(cli, d, c)) for c in CASES]
        results.append(("marker_stream", lambda: check_marker(cli, d)))
        for name, fn in results:
            if only and name not in only:
                continue
            why = fn()
            ok = why.startswith("ok")
            failed += not ok
            print("%s %s%s" % ("ok" if ok else "FAIL", name, why[2:] if ok else ": " + why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
