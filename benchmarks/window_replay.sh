#!/bin/bash
# window_replay.sh: windows optrace's Profiler records of real models (torchvision's resnet18 and
# mobilenet_v3_small, TorchScript, one 1x3x64x64 image, one thread), replayed from their execution
# trace and Kineto trace (bench_window_replay), in Debian trixie (torch 2.6):
#
#   bash .ci/trixie.sh --run 'bash /mnt/optrace/src/benchmarks/window_replay.sh WORK BUILD'
#
# WORK: a folder for the models and the traces; BUILD: a build of optrace against trixie's libtorch
# (bench_window_replay is built there). docs/replay.md keeps the figures.
set -euo pipefail
work=$1
build=$2
mkdir -p "$work"
export OMP_NUM_THREADS=1
cmake --build "$build" --target bench_window_replay >/dev/null
python3 - "$work" <<'PY'
import sys
import torch
import torchvision

torch.manual_seed(0)
for name in ["resnet18", "mobilenet_v3_small"]:
    model = getattr(torchvision.models, name)(weights=None).eval()
    torch.jit.trace(model, torch.randn(1, 3, 64, 64)).save(f"{sys.argv[1]}/{name}.pt")
PY
for m in resnet18 mobilenet_v3_small; do
  mkdir -p "$work/$m"
  "$build/benchmarks/bench_window_replay" "$work/$m.pt" 1 3 64 64 "$work/$m"
  echo
done
