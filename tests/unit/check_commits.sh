#!/usr/bin/env bash
# scripts/check-commits (docs/design.md, "Commits") against commits made in a
# scratch repository: a good message passes; a 73-character subject, a
# message without a body and one without the blank line fail, each with its
# own line. The commit-msg hook's message mode too. SKIPPED without git.
set -u
chk="${TCUDA_SOURCE_DIR:?}/scripts/check-commits"
command -v git > /dev/null 2>&1 || { echo "SKIPPED: no git"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cd "$tmp" && git init -q -b main . && git config user.email t@t && git config user.name t || fail "git init"
commit() { git commit -q --allow-empty -m "$1" || fail "commit"; }
commit $'base\n\nThe first commit.'
git checkout -q -b work
s72=$(printf 'x%.0s' $(seq 72))
commit "$s72"$'\n\nA subject of exactly 72 characters, with a body.'
commit $'\xc3\x97'"${s72:1}"$'\n\nA \xc3\x97 and 71 more characters: 72 characters in 73 bytes.'
"$chk" main..work > out 2>&1 || { cat out; fail "good commits flagged"; }
[ ! -s out ] || { cat out; fail "good commits printed something"; }

commit "${s72}y"$'\n\nOne character too many.'
commit "no body"
commit $'no blank line\nthe body at once'
"$chk" main..work > out 2>&1 && fail "bad commits passed"
grep -q 'subject is 73 characters' out || { cat out; fail "long subject not flagged"; }
grep -q 'no body.*: no body$' out || { cat out; fail "missing body not flagged"; }
grep -q 'no blank line after the subject' out || { cat out; fail "missing blank line not flagged"; }
[ "$(wc -l < out)" = 3 ] || { cat out; fail "expected exactly 3 problems"; }

printf 'Subject\n\nBody.\n# a comment git strips\n' > msg
"$chk" --message msg || fail "--message: a good message failed"
printf 'Subject only\n# Please enter the commit message\n' > msg
"$chk" --message msg > out && fail "--message: a message without body passed"
grep -q 'no body' out || fail "--message: no reason given"
echo PASS
