#!/usr/bin/env bash
# benchmarks/serve.sh [BUILD_DIR]: what optrace::aoti::PackageSet adds to the package it routes a
# call to, and call latency while the set is replaced (bench_serve), on a plan of 4 packages
# (--max-packages 4) from the traffic the serve_e2e test observes (run first if its files are
# not there). Needs libtorch >= 2.6; here, in the trixie chroot:
#   bash .ci/trixie.sh --run "bash benchmarks/serve.sh build-trixie"
# docs/performance.md has the figures.
set -euo pipefail
build=${1:-build}
cmake --build "$build" --target bench_serve serve_set observe_scripted optrace_cli
work=$build/tests/serve-e2e
[ -f "$work/observed/observations.json" ] || (cd "$build" && ctest -R '^serve_e2e$' --output-on-failure)
plan=$build/benchmarks/plan4
if [ ! -f "$plan/p3.pt2" ]; then
  "$build/examples/optrace" plan "$work/observed/observations.json" "$work/longer/observations.json" -o "$plan" \
    --max-packages 4 --force
  python3 examples/python/compile_package.py --plan "$plan/plan.json"
fi
"$build/benchmarks/bench_serve" "$plan"
