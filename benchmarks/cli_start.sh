#!/usr/bin/env bash
# benchmarks/cli_start.sh [BUILD_DIR]: what one run of the optrace tool costs on a tiny input,
# against `/usr/bin/python3 -c pass` in the same run (target: summary, merge and convert at most
# 3x Python's start). Each line: the mean wall time of 20 runs (after one warm-up run).
#   optrace        the front end, built without libtorch (summary, merge, convert of traces;
#                  summary of observation files)
#   optrace-torch  the whole tool, linked with libtorch (what `optrace` ran before; replay and
#                  text outputs, which the front end hands to it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target optrace_cli >/dev/null
bin=$build/examples
data=tests/data
work=${TMPDIR:-/tmp}/optrace-cli-start
rm -rf "$work" && mkdir -p "$work"
mean_of_20() {  # mean wall time of 20 runs of "$@", in milliseconds
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  local start end
  start=$(date +%s%N)
  for _ in $(seq 20); do "$@" >/dev/null 2>&1; done
  end=$(date +%s%N)
  echo "$start $end" | awk '{printf "%.2f", ($2 - $1) / 20 / 1e6}'
}
python=$(mean_of_20 /usr/bin/python3 -c pass)
printf "%-58s %8s %10s\n" "command (tiny input)" "ms/run" "x python"
row() {
  local name=$1; shift
  local ms; ms=$(mean_of_20 "$@")
  printf "%-58s %8s %10s\n" "$name" "$ms" "$(echo "$ms $python" | awk '{printf "%.1f", $1 / $2}')"
}
printf "%-58s %8s %10s\n" "python3 -c pass" "$python" "1.0"
row "optrace summary mlp.hf_op_trace.json (hf, 27 calls)" "$bin/optrace" summary $data/peer/mlp.hf_op_trace.json
row "optrace summary small_base.pt.trace.json.gz (Kineto)" "$bin/optrace" summary $data/kineto/small_base.pt.trace.json.gz
row "optrace summary tts_angular_training.txt (log)" "$bin/optrace" summary $data/oplogs/tts_angular_training.txt
row "optrace convert small_base.pt.trace.json.gz -o x.json" "$bin/optrace" convert $data/kineto/small_base.pt.trace.json.gz -o $work/x.json --force --quiet
row "optrace merge mlp + small_base -o m.json" "$bin/optrace" merge $data/peer/mlp.hf_op_trace.json $data/kineto/small_base.pt.trace.json.gz -o $work/m.json --force
row "optrace convert mlp.hf_op_trace.json -o x.txt (a log)" "$bin/optrace" convert $data/peer/mlp.hf_op_trace.json -o $work/x.txt --force --quiet
row "optrace summary masked.json (observation file)" "$bin/optrace" summary $data/observations/masked.json
row "optrace-torch summary mlp.hf_op_trace.json" "$bin/optrace-torch" summary $data/peer/mlp.hf_op_trace.json
row "optrace-torch summary small_base.pt.trace.json.gz" "$bin/optrace-torch" summary $data/kineto/small_base.pt.trace.json.gz
