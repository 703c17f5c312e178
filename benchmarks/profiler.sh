#!/usr/bin/env bash
# optrace::Profiler against torch.profiler on a TorchScript resnet18 forward (CPU, one thread,
# 2x3x112x112), side by side: bench_profiler (C++) and profiler_torch.py (Python) on the same
# model file, ROUNDS times each, alternating. torch.profiler needs torch >= 2 with Kineto: run it in
# the trixie chroot for both (docs/performance.md):
#   bash .ci/trixie.sh --run 'bash benchmarks/profiler.sh build-trixie 3'
set -euo pipefail
build=${1:-build}
runs=${2:-3}
cmake --build "$build" --target bench_profiler >/dev/null
model="$build/benchmarks/resnet18_script.pt"
python3 benchmarks/profiler_torch.py "$model" 1 1 >/dev/null  # makes the model file
for ((i = 1; i <= runs; i++)); do
  echo "== run $i"
  "$build/benchmarks/bench_profiler" "$model"
  python3 benchmarks/profiler_torch.py "$model"
done
