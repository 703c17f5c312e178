#!/usr/bin/env bash
# cmake/tsan.sh: the code that runs on several threads, built with clang's ThreadSanitizer in
# build-tsan/ and run by ctest there: the Kineto import in pieces (the kineto tests), OpTracer and
# InputObserver called from many threads (the op tracer and observer tests, and the reliability
# tests' 8-thread stress tests), the Profiler (its writer thread, the threads' buffers, async
# ranges ended on another thread: the distributed tests), the OnDemandProfiler (its polling,
# stepping and writer threads) and the CLI reading many files at once (cli_many_files). Any data race fails the test
# that met it. libtorch is not instrumented: what it synchronizes inside itself TSan cannot see,
# which is why only these programs are built here (each ran clean in repeated runs); a report
# that is provably libtorch's would go in a suppressions file, commented, as tests/sanitizers/ has.
# clang at -O0 with line tables, the test programs too: it builds in 123 s where -O1 took 263 s,
# and the tests below run as long (214 s against 212 s) on the 2-core VM (docs/ci.md).
# Environment: CXX (default clang++-14 or clang++, installed when missing), OPTRACE_TSAN_BUILD_DIR
# (build-tsan), OPTRACE_TSAN_OPT (-O0), OPTRACE_TSAN_JOBS (nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${OPTRACE_TSAN_BUILD_DIR:-build-tsan}
jobs=${OPTRACE_TSAN_JOBS:-$(nproc)}
flags="-fsanitize=thread -fno-omit-frame-pointer"
. cmake/clang.sh
cxx=$(optrace_clang) || exit 2
case "$cxx" in *clang*) lines=-gline-tables-only ;; *) lines=-g1 ;; esac
# Set for the build too: Catch2's test discovery and the operator-catalog capture run instrumented programs.
# allocator_may_return_null: a request beyond TSan's maximum (a test asks libtorch for 1 PiB) fails
# as malloc does, as under ASan (cmake/sanitize.sh).
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1}

start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS_RELEASE="${OPTRACE_TSAN_OPT:--O0} $lines -DNDEBUG" -DOPTRACE_TEST_OPTIMIZATION= \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DOPTRACE_BUILD_TESTS=ON -DOPTRACE_BUILD_EXAMPLES=ON -DOPTRACE_BUILD_BENCHMARKS=OFF -DOPTRACE_INSTALL=OFF
cmake --build "$build" --parallel "$jobs" --target optrace_tests optrace_cli
built=$(date +%s)
echo "== tsan.sh: built in $(( built - start )) s"
status=0
# The threaded tests of the programs built above; of the reliability tests only the threaded
# stress tests (its kill tests take minutes under TSan); the profiler's (its writer thread, the
# threads' buffers, the memory reporter) but the one that compares times with the wall clock, and
# the execution trace's comparison with torch's: its convolution backward runs in oneDNN's OpenMP
# threads, and libgomp, not instrumented, hands them libtorch's fresh buffers in a way TSan cannot
# see (it reported oneDNN's memset of a buffer c10 had just allocated as a race).
ctest --test-dir "$build" --output-on-failure --parallel "$jobs" \
  -R '^(kineto|op catalog|op tracer|observer|profiler|on demand|distributed): |^reliability: (8 threads|a long-running tracer)|^cli_many_files$' \
  -E '^profiler: (the step ranges add up|the execution trace holds the nodes torch)' || status=$?
echo "== tsan.sh: tests ran in $(( $(date +%s) - built )) s; total $(( $(date +%s) - start )) s; status $status"
exit $status
