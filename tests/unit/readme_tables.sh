#!/usr/bin/env bash
# Every table in README.md renders as a table: a header row, then the
# |---| separator, and each row with the header's number of cells.
set -u
readme="${TCUDA_SOURCE_DIR:?}/README.md"
awk '
  function cells(s) { gsub(/\\\|/, "", s); return gsub(/\|/, "|", s) - 1 }
  /^```/ { code = !code }
  !code && /^\|/ {
    n++
    if (n == 1) { want = cells($0); head = NR }
    else if (n == 2 && $0 !~ /^\|( *:?-+:? *\|)+$/) { print "README.md:" NR ": the table at line " head " has no header row"; bad = 1 }
    else if (cells($0) != want) { print "README.md:" NR ": " cells($0) " cells, the header has " want; bad = 1 }
    next
  }
  { n = 0 }
  END { exit bad }' "$readme" || { echo FAIL; exit 1; }
echo PASS
