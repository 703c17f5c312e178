#!/usr/bin/env bash
# cmake/sanitize.sh: builds optrace's test suite (the test programs and the CLI) with clang's
# AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs ctest there. Any report
# (memory error, leak, undefined behaviour) fails the test that made it. libtorch itself is not
# instrumented; what is provably libtorch's is suppressed in tests/sanitizers/ (commented).
# clang at -O0 with line tables (file and line in every report), the test programs too
# (OPTRACE_TEST_OPTIMIZATION left empty): it builds in 231 s where -O1 took 554 s, and the tests run
# in 495 s where they ran in 364 s (the parsers' inline code is slower unoptimized), on the 2-core
# VM: 192 s less (docs/ci.md). ASan finds at -O0 what it finds at -O1.
# Environment: CXX (default clang++-14 or clang++, installed when missing), OPTRACE_ASAN_BUILD_DIR
# (build-asan), OPTRACE_ASAN_OPT (-O0), OPTRACE_ASAN_JOBS (nproc), OPTRACE_ASAN_TESTS (a ctest -R regex: run a subset),
# OPTRACE_ASAN_EXCLUDE (a ctest -E regex; default: cli_front_end_same_answers and cli_growth_is_linear, below).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

build=${OPTRACE_ASAN_BUILD_DIR:-build-asan}
jobs=${OPTRACE_ASAN_JOBS:-$(nproc)}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
. cmake/clang.sh
cxx=$(optrace_clang) || exit 2
case "$cxx" in *clang*) lines=-gline-tables-only ;; *) lines=-g1 ;; esac

# Set for the build too: Catch2's test discovery runs the instrumented test programs.
# allocator_may_return_null: a request beyond ASan's maximum (a test asks libtorch for 1 PiB)
# fails as malloc does, so libtorch throws its "not enough memory" error instead of ASan aborting.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$root/tests/sanitizers/ubsan.supp}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0}

start=$(date +%s)
# -Wno-maybe-uninitialized: GCC 12 (CXX=g++) warns falsely about std::variant members once ASan
# instruments them; clang knows no such warning (-Wno-unknown-warning-option).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS_RELEASE="${OPTRACE_ASAN_OPT:--O0} $lines -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="$flags -Wno-unknown-warning-option -Wno-maybe-uninitialized" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DOPTRACE_BUILD_TESTS=ON -DOPTRACE_BUILD_EXAMPLES=ON -DOPTRACE_BUILD_BENCHMARKS=OFF -DOPTRACE_INSTALL=OFF \
  -DOPTRACE_TEST_HEADERS=OFF -DOPTRACE_TEST_PROCESSES=file -DOPTRACE_TEST_OPTIMIZATION= "-DOPTRACE_TEST_LEAVE_OUT=~[large_file]"
# The component tests run one process per test file (OPTRACE_TEST_PROCESSES=file: a process under
# ASan spends ~2 s loading libtorch), less the [large_file] cases (OPTRACE_TEST_LEAVE_OUT: a file
# of megabytes written and read again, 48 s at -O0 under ASan; the same readers' pieces run here
# on small texts, the large files in the Release stages). What the tests run is built: the test program (and
# test_layers, which reads headers as text), the CLI, the demo and trace_scripted (the parity tests
# run it on real models); not test_headers (OPTRACE_TEST_HEADERS=OFF: one unit per public header
# that only checks that it compiles on its own, nothing a sanitizer could check), the docs'
# snippets (compiled, never run) or observe_scripted (its tests need torch 2.6). gloo_ranks (the
# 2-rank job of the distributed tests) exists where gloo's headers are; its tests skip otherwise.
targets=(optrace_tests test_layers optrace_cli demo trace_scripted)
build_targets=$(cmake --build "$build" --target help)
grep -q '^gloo_ranks:' <<<"$build_targets" && targets+=(gloo_ranks)
cmake --build "$build" --parallel "$jobs" --target "${targets[@]}"
built=$(date +%s)
echo "== sanitize.sh: built in $(( built - start )) s"
# Left out by default: cli_front_end_same_answers compares the bytes two builds write (~70 runs
# of optrace-torch, each loading libtorch: 97 s of the stage's 236 s); the same code paths run
# here in the cli_* tests, and the comparison itself in the Release stages. cli_growth_is_linear
# counts instructions under valgrind, which cannot run a program built with ASan. The parity
# tests on convnext_tiny and mobilenet_v3_small (125 CPU-s under ASan at -O0) run the tracer
# and the operator-inputs writer on two more real models; resnet18, vit and lstm run them here,
# all five in the Release stages. The 64-rank jobs (the straggler's: 25 s of 64 processes under ASan;
# it passes) and every test that reads their traces (ctest label job_64_ranks): the 2- and 4-rank jobs
# run here, and the summary's blame and why under ASan in the rank_summary tests.
exclude=${OPTRACE_ASAN_EXCLUDE-^(cli_front_end_same_answers|cli_growth_is_linear|(tracer|oplog)_parity_(convnext_tiny|mobilenet_v3_small))\$}
status=0
ctest --test-dir "$build" --output-on-failure --parallel "$jobs" ${OPTRACE_ASAN_TESTS:+-R "$OPTRACE_ASAN_TESTS"} \
  ${exclude:+-E "$exclude"} -LE '^job_64_ranks$' || status=$?
echo "== sanitize.sh: tests ran in $(( $(date +%s) - built )) s; total $(( $(date +%s) - start )) s; status $status"
exit $status
