#!/usr/bin/env bash
# cmake/skipped.sh BUILD_DIR: the tests of the last ctest run in BUILD_DIR that skipped, each with
# its reason: every test that skips says why on a line "SKIPPED: <reason>" (the Catch2 tests
# through OPTRACE_SKIP, the Python ones before they exit 77), which ctest keeps in its log.
set -euo pipefail
log=${1:?usage: cmake/skipped.sh BUILD_DIR}/Testing/Temporary/LastTest.log
[ -f "$log" ] || { echo "skipped.sh: no ctest log in $1" >&2; exit 2; }
# The reason is the first line that begins "SKIPPED: " (OPTRACE_SKIP prints one whole, unwrapped,
# beside Catch's report, which wraps at 80 columns and indents).
awk '
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; next }
  /^SKIPPED: / && name != "" { sub(/^SKIPPED: /, ""); reasons[++n] = name ": " $0; name = "" }
  END {
    printf "== skipped tests: %d\n", n
    for (i = 1; i <= n; i++) printf "   %s\n", reasons[i]
  }' "$log"
