#!/usr/bin/env bash
# cmake/fuzz.sh [SECONDS] [TARGET...]: builds optrace's libFuzzer targets (tests/fuzz/) with clang
# in build-fuzz/ and fuzzes each for SECONDS (default 30), one per core at a time. Each run starts
# from the kept corpus (tests/fuzz/corpus/<target>/, read only: new inputs go to a scratch copy)
# after replaying the regression inputs (tests/fuzz/regressions/<target>/). Fails on any crash,
# leak, sanitizer report or uncaught non-optrace exception; libFuzzer then writes the
# input as build-fuzz/artifacts/<target>/crash-* (keep it under tests/fuzz/regressions/<target>/
# and add a regression test). TARGET: a file tests/fuzz/fuzz_TARGET.cpp (default: all of them).
# Environment: CXX (default clang++-14 or clang++), OPTRACE_FUZZ_BUILD_DIR (build-fuzz),
# OPTRACE_FUZZ_JOBS (build parallelism, default 2), OPTRACE_FUZZ_PARALLEL (targets fuzzed at once,
# default nproc), OPTRACE_FUZZ_RSS_MB (2048 per target).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${1:-30}
shift || true
build=${OPTRACE_FUZZ_BUILD_DIR:-build-fuzz}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
jobs=${OPTRACE_FUZZ_JOBS:-2}
rss_mb=${OPTRACE_FUZZ_RSS_MB:-2048}
. cmake/clang.sh
cxx=$(optrace_clang) || exit 2

all=()
for f in tests/fuzz/fuzz_*.cpp; do t=${f#tests/fuzz/fuzz_}; all+=("${t%.cpp}"); done
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

start=$(date +%s)
mkdir -p "$build"
# -gline-tables-only: file and line in reports, without the full debug info that doubles the build.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DOPTRACE_FUZZ=ON -DOPTRACE_BUILD_TESTS=OFF -DOPTRACE_BUILD_EXAMPLES=OFF -DOPTRACE_BUILD_BENCHMARKS=OFF \
  -DOPTRACE_INSTALL=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --parallel "$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}")
echo "== fuzz.sh: built in $(( $(date +%s) - start )) s"

# Sanitizer settings: leaks are errors; what is provably libtorch's is suppressed in the one
# commented file tests/sanitizers/lsan.supp (nothing of optrace's may go there).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0}

# fuzz_one TARGET: replays the regressions, then fuzzes; its report goes to stdout, exit 1 on a finding.
fuzz_one() {
  local t=$1
  local bin="$build/tests/fuzz/fuzz_$t"
  local corpus="$root/tests/fuzz/corpus/$t"
  local regressions="$root/tests/fuzz/regressions/$t"
  local work="$build/corpus/$t"        # grows while fuzzing; seeded from the kept corpus
  local artifacts="$build/artifacts/$t/"
  rm -rf "$artifacts"  # reproducers of an earlier run: copy them before running again
  mkdir -p "$work" "$artifacts"
  if [ -d "$regressions" ]; then
    echo "== fuzz.sh: $t: replaying $(ls "$regressions" | wc -l) regression inputs"
    "$bin" -runs=0 -rss_limit_mb="$rss_mb" -detect_leaks=1 -artifact_prefix="$artifacts" "$regressions" 2>&1 | tail -5
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "== fuzz.sh: $t: FAILED on a regression input"; return 1; }
  fi
  echo "== fuzz.sh: $t: fuzzing for $seconds s"
  local t0 rc
  t0=$(date +%s)
  # -max_len: the corpus holds files up to ~70 KB; mutations stay within 128 KB.
  # -timeout: one input taking over 25 s is a hang (a bug too).
  "$bin" -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -detect_leaks=1 \
      -max_len=131072 -timeout=25 -print_final_stats=1 -artifact_prefix="$artifacts" "$work" "$corpus" \
      >"$build/fuzz-$t.log" 2>&1
  rc=$?
  grep -E 'INITED|DONE|ERROR|SUMMARY|^stat::|runtime error|terminate|property failed|Test unit written|Slowest unit' \
    "$build/fuzz-$t.log" | head -60 || true
  echo "== fuzz.sh: $t: exit $rc after $(( $(date +%s) - t0 )) s; $(grep -E '^stat::number_of_executed_units' "$build/fuzz-$t.log" | tail -1 | awk '{print $2}') executions (log: $build/fuzz-$t.log)"
  if [ "$rc" -ne 0 ]; then
    echo "== fuzz.sh: $t: FAILED; reproducer(s): $(ls "$artifacts" | tr '\n' ' ')"
    return 1
  fi
}

# The targets run OPTRACE_FUZZ_PARALLEL at a time (default: one per core; libFuzzer uses one
# thread), each to the end; their reports are printed in order, and any finding fails the run.
parallel=${OPTRACE_FUZZ_PARALLEL:-$(nproc)}
pids=()
set +e
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
  fuzz_one "$t" >"$build/fuzz-$t.report" 2>&1 &
  pids+=("$!")
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$build/fuzz-${targets[$i]}.report"
done
set -e
echo "== fuzz.sh: done in $(( $(date +%s) - start )) s, status $status"
exit $status
