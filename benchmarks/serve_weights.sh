#!/usr/bin/env bash
# benchmarks/serve_weights.sh [BUILD_DIR]: one copy of a plan's weights, concurrent calls on one
# package, and call latency while replace_weights swaps checkpoints (bench_weights), on a plan of 4
# packages of a model of about 300 MB of weights (serve_weights.py compiles it, once: several
# minutes). Needs libtorch >= 2.6; here, in the trixie chroot:
#   bash .ci/trixie.sh --run "bash benchmarks/serve_weights.sh build-trixie"
# docs/performance.md has the figures.
set -euo pipefail
build=${1:-build}
cmake --build "$build" --target bench_weights observe_scripted optrace_cli
work=$build/benchmarks/weights
[ -f "$work/single.pt2" ] || python3 benchmarks/serve_weights.py "$build" "$work"
export OMP_NUM_THREADS=1  # intra-op threads 1: what the calls per second compare is the runners
"$build/benchmarks/bench_weights" rss "$work/single.pt2"
"$build/benchmarks/bench_weights" rss "$work/plan"
"$build/benchmarks/bench_weights" threads "$work/plan" 5
# The same on the demo's plan (serve_e2e's, compiled with shared weights): calls bound by compute,
# where the big model's are bound by memory bandwidth (every call reads its 270 MB).
[ -f "$build/tests/serve-e2e/plan1/weights.pt" ] || (cd "$build" && ctest -R '^serve_e2e$' --output-on-failure)
"$build/benchmarks/bench_weights" threads "$build/tests/serve-e2e/plan1" 5
"$build/benchmarks/bench_weights" swap "$work/plan" "$work/weights_v2.pt" 10
