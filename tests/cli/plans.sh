#!/usr/bin/env bash
# tests/cli/plans.sh OPTRACE OBSERVATIONS WORKDIR: an output never lands on a file a plan makes a
# command read (plan.json, an observation file, a package, the weights), whatever its spelling
# (a hard link included), even with --force; the plan keeps its bytes. Prints "plans: all refused".
set -u
optrace=$1 observations=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
"$optrace" plan "$observations" -o "$work/P" >/dev/null || fail "plan exited $?"
cp -r "$work/P" "$work/P.before"
ln "$work/P/plan.json" "$work/linked.json" || fail "ln"

# refused OUTPUT INPUT: drift P ... --json OUTPUT --force exits 2 with one line naming both.
refused() {
  local output=$1 input=$2 err
  err=$("$optrace" drift "$work/P" "$observations" --json "$output" --force 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" = 2 ] || fail "drift --json $output: exit $rc, expected 2 ($err)"
  [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] || fail "drift --json $output: more than one line: $err"
  case "$err" in
    "optrace: $output: IoError: refusing to write an output onto the input '$input'") ;;
    *) fail "drift --json $output: $err" ;;
  esac
  diff -r "$work/P" "$work/P.before" >/dev/null || fail "drift --json $output changed the plan"
}
refused "$work/P/plan.json" "$work/P/plan.json"
refused "$work/P/p0.observations.json" "$work/P/p0.observations.json"
refused "$work/P/./p1.observations.json" "$work/P/p1.observations.json"
refused "$work/linked.json" "$work/P/plan.json"
refused "$work/P/weights.pt" "$work/P/weights.pt"
# An output elsewhere is written.
"$optrace" drift "$work/P" "$observations" --json "$work/drift.json" >/dev/null
[ $? = 0 ] && [ -s "$work/drift.json" ] || fail "drift --json elsewhere"
echo "plans: all refused"
