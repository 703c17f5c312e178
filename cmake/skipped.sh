#!/usr/bin/env bash
# cmake/skipped.sh BUILD_DIR: the tests of the last ctest run in BUILD_DIR that skipped, each with
# its reason: every test that skips says why on a line "SKIPPED: <reason>" (the Catch2 tests
# through OPTRACE_SKIP, the Python ones before they exit 77), which ctest keeps in its log.
set -euo pipefail
log=${1:?usage: cmake/skipped.sh BUILD_DIR}/Testing/Temporary/LastTest.log
[ -f "$log" ] || { echo "skipped.sh: no ctest log in $1" >&2; exit 2; }
# Catch2 v3's SKIP prints "file:line: SKIPPED:", then "explicitly with message:" and the reason
# on the lines after it.
awk '
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; pending = 0; next }
  pending && /explicitly with message:/ { next }
  pending && /[^ ]/ { sub(/^ +/, ""); reasons[++n] = name ": " $0; name = ""; pending = 0; next }
  /SKIPPED:[ ]*$/ && name != "" { pending = 1; next }
  /SKIPPED: / && name != "" { sub(/.*SKIPPED: /, ""); reasons[++n] = name ": " $0; name = "" }
  END {
    printf "== skipped tests: %d\n", n
    for (i = 1; i <= n; i++) printf "   %s\n", reasons[i]
  }' "$log"
