#!/usr/bin/env bash
# benchmarks/cli_many.sh [BUILD_DIR]: the optrace CLI on 8 files in one run against 8 runs of one
# file each (the way a shell loop over ranks' traces runs it), for summary, convert (into a
# directory) and merge. The 8 inputs are what a job of 8 ranks leaves, of mixed formats and
# similar sizes: 6 Kineto traces of ~10 MB made from the real mtia_inference trace by repeating
# its events (benchmarks/kineto_repeat.py; 3 of them gzip-compressed), one of them converted to
# an hf op trace, and an operator-inputs log made of the 3 real logs repeated.
# Prints the wall time of each way, best of 3, and their ratio (target: many <= 0.6 x singles).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
optrace=$build/examples/optrace
cmake --build "$build" --target optrace_cli >/dev/null
work=${TMPDIR:-/tmp}/optrace-cli-many
mkdir -p "$work"
data=../shared/data
[ -d "$data/kineto" ] || data=tests/data
inputs=()
for rank in 0 1 2 3 4 5; do
  f=$work/rank$rank.pt.trace.json
  [ -f "$f" ] || /usr/bin/python3 benchmarks/kineto_repeat.py "$data/kineto/mtia_inference.pt.trace.json.gz" "$f" $((9 + rank % 3)) >/dev/null
  if [ $((rank % 2)) = 1 ]; then
    [ -f "$f.gz" ] || gzip -k -1 "$f"
    inputs+=("$f.gz")
  else
    inputs+=("$f")
  fi
done
[ -f "$work/rank6.hf_op_trace.json" ] || "$optrace" convert "$work/rank0.pt.trace.json" -o "$work/rank6.hf_op_trace.json" --quiet
inputs+=("$work/rank6.hf_op_trace.json")
if [ ! -f "$work/rank7.txt" ]; then
  for _ in $(seq 40); do cat "$data"/oplogs/*.txt; done >"$work/rank7.txt"
fi
inputs+=("$work/rank7.txt")
ls -la "${inputs[@]}" | awk '{print $5, $9}'
echo "cores: $(nproc)"

best_of_3() {  # prints the best wall time of 3 runs of "$@", in seconds
  local best=
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    end=$(date +%s.%N)
    best=$(echo "$start $end ${best:-1e9}" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
  done
  echo "$best"
}
singles_summary() { for f in "${inputs[@]}"; do "$optrace" summary "$f"; done; }
singles_convert() { rm -rf "$work/one"; mkdir -p "$work/one"; for f in "${inputs[@]}"; do "$optrace" convert "$f" -o "$work/one" --quiet; done; }
many_convert() { rm -rf "$work/many"; "$optrace" convert "${inputs[@]}" -o "$work/many" --quiet; }
# merge, as a loop would: the first file converted, then each next one merged into the result.
singles_merge() {
  "$optrace" convert "${inputs[0]}" -o "$work/acc0.json" --force --quiet
  for k in $(seq 1 $((${#inputs[@]} - 1))); do
    "$optrace" merge "$work/acc$((k - 1)).json" "${inputs[$k]}" -o "$work/acc$k.json" --force
  done
}
many_merge() { "$optrace" merge "${inputs[@]}" -o "$work/merged.json" --force; }

printf "%-8s %12s %12s %8s %18s\n" command "8 runs (s)" "1 run (s)" ratio "1 run --jobs 1 (s)"
for command in summary convert merge; do
  case $command in
    summary) singles=$(best_of_3 singles_summary); many=$(best_of_3 "$optrace" summary "${inputs[@]}")
             serial=$(best_of_3 "$optrace" summary --jobs 1 "${inputs[@]}") ;;
    convert) singles=$(best_of_3 singles_convert); many=$(best_of_3 many_convert)
             serial=$(best_of_3 eval 'rm -rf "$work/many"; "$optrace" convert --jobs 1 "${inputs[@]}" -o "$work/many" --quiet') ;;
    merge) singles=$(best_of_3 singles_merge); many=$(best_of_3 many_merge)
           serial=$(best_of_3 "$optrace" merge --jobs 1 "${inputs[@]}" -o "$work/merged.json" --force) ;;
  esac
  printf "%-8s %12.2f %12.2f %8.2f %18.2f\n" "$command" "$singles" "$many" "$(echo "$many $singles" | awk '{print $1 / $2}')" "$serial"
done
echo "(--jobs default: one file per core; ratio = 1 run / 8 runs, target <= 0.6)"
# Bounded memory: the peak resident size of the 8-file summary against the largest single-file one.
if [ -x /usr/bin/time ]; then
  peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
  single_peak=0
  for f in "${inputs[@]}"; do
    kb=$(peak "$optrace" summary "$f")
    [ "$kb" -gt "$single_peak" ] && single_peak=$kb
  done
  echo "peak resident memory: summary of the 8 files $(( $(peak "$optrace" summary "${inputs[@]}") / 1024 )) MB" \
       "(--jobs 1: $(( $(peak "$optrace" summary --jobs 1 "${inputs[@]}") / 1024 )) MB);" \
       "largest single-file summary $(( single_peak / 1024 )) MB"
fi
