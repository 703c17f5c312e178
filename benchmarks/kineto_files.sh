#!/usr/bin/env bash
# benchmarks/kineto_files.sh [BUILD_DIR]: Kineto import speed on real traces (bench_kineto_files):
# the traces of ../shared/data/kineto (HolisticTraceAnalysis's test data), a ~100 MB trace made
# by repeating the events of the largest of them, and the torch 2.6 traces of torchvision models
# that the trixie stage's kineto_parity tests write (build-trixie/tests/kineto-parity/, when
# present: `bash .ci/trixie.sh` makes them) and the torch 2.6 traces of torchvision models
# training that benchmarks/torch_traces.py writes (build-trixie/benchmarks/torch-traces/, when
# present: `bash .ci/trixie.sh --run 'python3 benchmarks/torch_traces.py
# build-trixie/benchmarks/torch-traces'`). Extra trace files can follow as arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
cmake --build "$build" --target bench_kineto_files >/dev/null
work=${TMPDIR:-/tmp}/optrace-kineto-files
mkdir -p "$work"
data=../shared/data/kineto
[ -d "$data" ] || data=tests/data/kineto
files=("$data"/*.pt.trace.json.gz)
big=$work/mtia_inference_x100MB.pt.trace.json
[ -f "$big" ] || /usr/bin/python3 benchmarks/kineto_repeat.py "$data/mtia_inference.pt.trace.json.gz" "$big" 100
files+=("$big")
for f in build-trixie/tests/kineto-parity/*/*.pt.trace.json build-trixie/benchmarks/torch-traces/*.pt.trace.json; do
  [ -f "$f" ] && files+=("$f")
done
"$build/benchmarks/bench_kineto_files" "${files[@]}" "$@"
