#!/usr/bin/env bash
# benchmarks/rank_summary.sh [BUILD_DIR]: `optrace summary --by rank` of 8 rank traces of ~100 MB
# each (benchmarks/rank_job.py: the real torch 2.6 gloo trace of tests/data/distributed_gloo_torch26
# repeated step after step, ranks 0..7 on one clock, rank 5 running an aten::mm of 40 ms more
# before step 2's first all-reduce), with --jobs 1 and --jobs 2: wall time and peak RSS
# (/usr/bin/time) of each, once. Prints figures; fails only if the tool does. The 800 MB are
# deleted at the end (KEEP=1 keeps them). The same at 8 to 16,384 ranks of ~1.2 MB:
# benchmarks/rank_scale.py.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target optrace_cli >/dev/null
work=${TMPDIR:-/tmp}/optrace-rank-summary
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$work"' EXIT
[ -f "$work/rank7.pt.trace.json" ] ||
  /usr/bin/python3 benchmarks/rank_job.py tests/data/distributed_gloo_torch26/rank1.*.pt.trace.json.gz "$work" 8 100 --straggler 5 2 40
du -sh "$work"
for jobs in 1 2; do
  printf 'summary --by rank, 8 traces, --jobs %s: ' "$jobs"
  /usr/bin/time -f '%e s wall, %U s user, peak RSS %M KB' "$build/examples/optrace" summary --by rank "$work" --jobs "$jobs" \
    2>&1 >/dev/null | tr '\n' ' '
  echo
done
