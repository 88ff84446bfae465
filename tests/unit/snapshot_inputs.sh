#!/usr/bin/env bash
# Snapshot and trace inputs beyond a plain file, wherever the CLI reads one
# (whatif, replay --simulate, viz): gzip files (python3's gzip and zlib
# write them: the reference encoder) give the same output as the plain file,
# "-" reads standard input, and a gzip bomb is refused by --max-input's cap
# on the decompressed bytes. Damaged gzip data is a parse error naming the
# file.
set -u
cli=${TCUDA_CLI:?}
data=${TCUDA_TEST_DATA:?}
command -v python3 > /dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
snap=$data/whatif/tf_at_limit.pickle
small=$data/whatif/side_stream.pickle
trace=$data/replay/basic.trace

# gzip variants: levels 1 and 9, stored blocks (level 0), a header with a
# file name, extra field and header CRC, and two members one after another.
python3 - "$snap" "$small" "$trace" "$tmp" <<'PY' || { echo "FAIL: could not write the gzip files"; exit 1; }
import gzip, struct, sys, zlib
snap, small, trace, out = sys.argv[1:]
data = open(snap, "rb").read()
for level in (0, 1, 9):
    open("%s/l%d.pickle.gz" % (out, level), "wb").write(gzip.compress(data, level))
def member(payload, level=6):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = c.compress(payload) + c.flush()
    flg = 2 | 4 | 8 | 16
    head = b"\x1f\x8b\x08" + bytes([flg]) + b"\0\0\0\0\0\xff"
    head += struct.pack("<H", 3) + b"abc" + b"name.pickle\0" + b"a comment\0"
    head += struct.pack("<H", zlib.crc32(head) & 0xffff)
    return head + body + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xffffffff)
open(out + "/header.pickle.gz", "wb").write(member(data))
half = len(data) // 2
open(out + "/members.pickle.gz", "wb").write(member(data[:half], 1) + member(data[half:], 9))
open(out + "/trace.gz", "wb").write(gzip.compress(open(trace, "rb").read()))
open(out + "/small.pickle.gz", "wb").write(gzip.compress(open(small, "rb").read()))
# 8 MiB of a pickle's start and zeros, from a few KiB
open(out + "/bomb.pickle.gz", "wb").write(gzip.compress(b"\x80\x04" + bytes(8 << 20), 9))
good = gzip.compress(data)
bad_crc = bytearray(good); bad_crc[-8] ^= 1
open(out + "/badcrc.pickle.gz", "wb").write(bytes(bad_crc))
open(out + "/short.pickle.gz", "wb").write(good[: len(good) // 2])
bad_block = bytearray(good); bad_block[10] |= 6  # block type 3: reserved
open(out + "/badblock.pickle.gz", "wb").write(bytes(bad_block))
PY

"$cli" whatif "$snap" > "$tmp/plain.txt" 2>&1 || bad "whatif on the plain snapshot failed"
for f in l0 l1 l9 header members; do
  "$cli" whatif "$tmp/$f.pickle.gz" > "$tmp/$f.txt" 2>&1 || bad "whatif $f.pickle.gz: $(head -3 "$tmp/$f.txt")"
  cmp -s "$tmp/plain.txt" "$tmp/$f.txt" || bad "whatif $f.pickle.gz differs from the plain file"
done
"$cli" whatif - < "$snap" > "$tmp/stdin.txt" 2>&1 || bad "whatif - (plain) failed"
cmp -s "$tmp/plain.txt" "$tmp/stdin.txt" || bad "whatif - < plain differs"
cat "$tmp/l9.pickle.gz" | "$cli" whatif - > "$tmp/stdin.txt" 2>&1 || bad "whatif - (gzip, a pipe) failed"
cmp -s "$tmp/plain.txt" "$tmp/stdin.txt" || bad "whatif - < gzip differs"

# replay --simulate: a snapshot and a trace, gzip and standard input
"$cli" replay --simulate "$small" > "$tmp/r.json" 2> /dev/null || bad "replay of the plain snapshot failed"
for src in "$tmp/small.pickle.gz" -; do
  if [ "$src" = - ]; then "$cli" replay --simulate - < "$tmp/small.pickle.gz" > "$tmp/r2.json" 2> "$tmp/err"
  else "$cli" replay --simulate "$src" > "$tmp/r2.json" 2> "$tmp/err"; fi
  [ $? = 0 ] || bad "replay --simulate $src: $(head -3 "$tmp/err")"
  cmp -s "$tmp/r.json" "$tmp/r2.json" || bad "replay --simulate $src differs from the plain snapshot"
done
"$cli" replay --simulate "$trace" > "$tmp/t.json" 2> /dev/null || bad "replay of the plain trace failed"
"$cli" replay --simulate "$tmp/trace.gz" > "$tmp/t2.json" 2> /dev/null || bad "replay of trace.gz failed"
cmp -s "$tmp/t.json" "$tmp/t2.json" || bad "replay of trace.gz differs"
"$cli" replay --simulate - < "$trace" > "$tmp/t3.json" 2> /dev/null || bad "replay - < trace failed"
cmp -s "$tmp/t.json" "$tmp/t3.json" || bad "replay - < trace differs"
ls "${TMPDIR:-/tmp}"/tcuda-stdin.* > /dev/null 2>&1 && bad "replay - left its temporary file"

# viz: the page embeds the decompressed pickle
"$cli" viz "$small" -o "$tmp/a.html" 2> /dev/null || bad "viz of the plain snapshot failed"
"$cli" viz "$tmp/small.pickle.gz" -o "$tmp/b.html" 2> /dev/null || bad "viz of small.pickle.gz failed"
"$cli" viz - -o "$tmp/c.html" < "$tmp/small.pickle.gz" 2> /dev/null || bad "viz - failed"
for f in b c; do
  sed 's/nonce="[0-9a-f]*"/nonce/g; s/nonce-[0-9a-f]*/nonce/g' "$tmp/a.html" > "$tmp/a.n"
  sed 's/nonce="[0-9a-f]*"/nonce/g; s/nonce-[0-9a-f]*/nonce/g' "$tmp/$f.html" > "$tmp/$f.n"
  cmp -s "$tmp/a.n" "$tmp/$f.n" || bad "viz page from $f differs from the plain file's"
done

# the cap holds for the decompressed bytes: a bomb stops there
bomb=$tmp/bomb.pickle.gz
for args in "whatif --max-input 1MiB $bomb" "replay --simulate --max-input 1MiB $bomb" "viz --max-input 1MiB $bomb"; do
  # shellcheck disable=SC2086
  "$cli" $args > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc = 1 ] || [ $rc = 2 ] || bad "tcuda $args -> exit $rc, want a refusal"
  grep -q "input cap" "$tmp/err" || bad "tcuda $args: no input-cap message: $(head -3 "$tmp/err")"
done
"$cli" whatif --max-input 1MiB - < "$bomb" > /dev/null 2> "$tmp/err" && bad "whatif - took the bomb"
grep -q "input cap of 1048576 bytes once decompressed" "$tmp/err" || bad "whatif - bomb: $(head -3 "$tmp/err")"

# damaged gzip data: a parse error that names the file
for f in badcrc short badblock; do
  "$cli" whatif "$tmp/$f.pickle.gz" > /dev/null 2> "$tmp/err"; rc=$?
  [ $rc = 1 ] || bad "whatif $f.pickle.gz -> exit $rc, want 1"
  grep -q "$f.pickle.gz: .*gzip" "$tmp/err" || bad "whatif $f.pickle.gz: $(head -3 "$tmp/err")"
done

[ $fail = 0 ] && echo "snapshot_inputs: ok"
exit $fail
