#!/usr/bin/env bash
# Progress of tcuda viz and tcuda whatif: on stderr when it is a terminal
# (a pty here), redrawn in place and cleared at the end; nothing when it is
# a file. The library only calls back; the CLI prints. Exit 77 (skipped)
# without python3 (its pty module gives the terminal).
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}
command -v python3 >/dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

SNAP="$DATA/whatif/tf_default.pickle"
[ -f "$SNAP" ] || fail "no $SNAP"

# stderr on a pty: the progress lines, then the line cleared
python3 - "$CLI" "$SNAP" "$W" <<'PY' || fail "progress on a terminal"
import os, pty, subprocess, sys, threading
cli, snap, w = sys.argv[1:4]

def on_tty(args):
    m, s = pty.openpty()
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=s)
    os.close(s)
    out = []
    def read():
        while True:
            try:
                b = os.read(m, 65536)
            except OSError:
                break
            if not b:
                break
            out.append(b)
    t = threading.Thread(target=read)
    t.start()
    rc = p.wait(timeout=300)
    t.join(timeout=30)
    os.close(m)
    return rc, b"".join(out).decode("utf-8", "replace")

rc, err = on_tty([cli, "viz", snap, "-o", w + "/p.html"])
assert rc == 0, (rc, err)
for stage in ("read", "parse", "trace"):
    assert "\rtcuda viz: " + stage in err, (stage, err)
assert "trace 0/" in err and "(100%)" in err, err
assert "\r\x1b[K" in err, "the progress line is not cleared: %r" % err
assert err.rstrip("\r\n").endswith("bytes of data)"), err   # the closing message stays

rc, err = on_tty([cli, "whatif", "--threads", "2", snap])
assert rc == 0, (rc, err)
assert "\rtcuda whatif: read..." in err, err
rows = [l for l in err.split("\r") if l.startswith("tcuda whatif: replay ")]
assert rows, err
done, total = rows[-1].split()[3].split("/")
assert done == total and int(total) >= 2, rows   # the first replay, then every row
assert err.endswith("\r\x1b[K"), repr(err[-40:])
print("tty:", len(rows), "replay lines for whatif")
PY

# stderr a file: no progress at all
"$CLI" viz "$SNAP" -o "$W/q.html" 2>"$W/viz.err" || fail "viz"
"$CLI" whatif --threads 2 "$SNAP" >/dev/null 2>"$W/whatif.err" || fail "whatif"
for f in viz whatif; do
  grep -q $'\r' "$W/$f.err" && fail "$f wrote a progress line to a file: $(cat -A "$W/$f.err" | head -3)"
  grep -q "parse\|trace \|replay " "$W/$f.err" && fail "$f wrote progress to a file"
done
[ "$(wc -l < "$W/viz.err")" -eq 1 ] || fail "viz wrote more than its closing line: $(cat "$W/viz.err")"
[ -s "$W/whatif.err" ] && fail "whatif wrote to stderr: $(cat "$W/whatif.err")"
echo "ok"
