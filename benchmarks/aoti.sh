#!/usr/bin/env bash
# benchmarks/aoti.sh [BUILD_DIR]: what optrace::aoti::Package::call adds to AOTInductor's own run,
# on the demo model's package (token ids and a mask), compiled by the aoti_e2e_demo test if it is
# not there yet. Needs libtorch >= 2.6; here, in the trixie chroot:
#   bash .ci/trixie.sh --run "bash benchmarks/aoti.sh build-trixie"
# docs/performance.md has the figures.
set -euo pipefail
build=${1:-build}
cmake --build "$build" --target bench_aoti aoti_serve observe_scripted
work=$build/tests/aoti-e2e/demo
[ -f "$work/model.pt2" ] || (cd "$build" && ctest -R '^aoti_e2e_demo$' --output-on-failure)
"$build/benchmarks/bench_aoti" "$work/model.pt2" "$work/observations.json"
