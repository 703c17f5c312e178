#!/usr/bin/env bash
# benchmarks/kineto_layouts.sh [BUILD_DIR]: a Kineto trace streamed in the layouts other tools
# write. The ~100 MB trace of kineto_files.sh (the profiler's `},\n  {` between events), rewritten
# with `},{` (json.dump(separators=(",", ":"))'s, every line break and indentation dropped) and
# with `},\n{` (a trace merger's), each gzipped: bench_kineto_files times kineto::load of the plain
# files; bench_kineto_rss gives the time and peak RSS of one kineto::load and one
# KeyAverages::from_kineto_file of each .gz, in a process of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target bench_kineto_files bench_kineto_rss >/dev/null
work=${TMPDIR:-/tmp}/optrace-kineto-files
mkdir -p "$work"
data=../shared/data/kineto
[ -d "$data" ] || data=tests/data/kineto
big=$work/mtia_inference_x100MB.pt.trace.json
[ -f "$big" ] || /usr/bin/python3 benchmarks/kineto_repeat.py "$data/mtia_inference.pt.trace.json.gz" "$big" 100
[ -f "$work/compact_x100MB.pt.trace.json" ] || /usr/bin/python3 - "$big" "$work" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[2] + "/compact_x100MB.pt.trace.json", "w").write(re.sub(r"\n *", "", text))
open(sys.argv[2] + "/nl_x100MB.pt.trace.json", "w").write(re.sub(r"\n *", "\n", text))
PY
files=("$big" "$work/compact_x100MB.pt.trace.json" "$work/nl_x100MB.pt.trace.json")
for f in "${files[@]}"; do [ -f "$f.gz" ] || gzip -k -1 "$f"; done
"$build/benchmarks/bench_kineto_files" --optrace-only "${files[@]}"
for f in "${files[@]}"; do
  for mode in load ka; do
    printf '%-32s %-4s ' "$(basename "$f").gz" "$mode"
    /usr/bin/time -f '%e s, peak RSS %M KB' "$build/benchmarks/bench_kineto_rss" "$mode" "$f.gz" 2>&1 | tr '\n' ' '
    echo
  done
done
