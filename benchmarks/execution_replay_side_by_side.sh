#!/bin/bash
# execution_replay_side_by_side.sh: optrace replay and param's et_replay on the same execution
# traces, in Debian trixie (torch 2.6): calls replayed, what each fails on, the time each reports,
# and the time the Kineto trace of the same window recorded. Prints a markdown table
# (docs/replay.md keeps it).
#
#   bash .ci/trixie.sh --run 'bash /mnt/optrace/src/benchmarks/execution_replay_side_by_side.sh WORK OPTRACE'
#
# The traces: torch 2.6's ExecutionTraceObserver's of four real windows
# (tests/python/execution_trace_models.py), and optrace's Profiler's of a CUDA window
# (tests/data/profiler_cuda), replayed here on the CPU.
# WORK: a folder for the traces and logs; OPTRACE: the `optrace` (or optrace-torch) program built
# against trixie's libtorch. Needs, in the chroot: python3-torchvision and what
# ../shared/consumers/README.md lists for et_replay (python3-intervaltree, ...). Both tools run
# single-threaded (OMP_NUM_THREADS=1), as the traces were recorded; et_replay with
# --warmup-iter 2 --iter 10 (comp mode, --cpu), optrace with --time (2 warm-up passes, 10 timed).
set -euo pipefail
work=$1
optrace=$2
src=$(cd "$(dirname "$0")/.." && pwd)
consumers=${OPTRACE_CONSUMERS:-$src/../shared/consumers}
mkdir -p "$work"
export OMP_NUM_THREADS=1
models=(resnet18 mobilenet_v3_small transformer train_step)
python3 "$src/tests/python/execution_trace_models.py" "$work" "${models[@]}"
# optrace's own Profiler's execution trace and Kineto trace of a window on an H200 (tests/data/profiler_cuda).
zcat "$src/tests/data/profiler_cuda/optrace_cuda_et.json.gz" > "$work/optrace_profiler_cuda.et.json"
zcat "$src/tests/data/profiler_cuda/optrace_cuda.pt.trace.json.gz" > "$work/optrace_profiler_cuda.pt.trace.json"
models+=(optrace_profiler_cuda)

echo "| trace | nodes | et_replay: ops built of picked (skipped; runs failed) | et_replay ms/iteration | optrace: ok of calls (skipped, error) | optrace: inputs an earlier call's / from outside | optrace ms (medians) | recorded ms (Kineto, with the ET) | top-10 ops kept | recorded ms (Kineto alone) | top-10 kept (Kineto alone) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  et=$work/$m.et.json
  PYTHONPATH=$consumers/param python3 "$consumers/run_et_replay_cpu.py" --input "$et" -m comp --cpu --warmup-iter 2 --iter 10 \
    > "$work/$m.et_replay.log" 2>&1 || true
  "$optrace" replay "$et" --kineto "$work/$m.pt.trace.json" --device cpu --time --no-progress --force \
    --json "$work/$m.optrace.json" > "$work/$m.optrace.log" 2>&1 || true
  python3 - "$m" "$et" "$work/$m.et_replay.log" "$work/$m.optrace.json" "$work/$m.kineto_only.pt.trace.json" <<'EOF'
import json, os, re, sys
model, et, log, report, alone = sys.argv[1:]
nodes = len(json.load(open(et))["nodes"])
text = open(log).read()
w = re.search(r"\[wrapper\] picked=(\d+) .*skip_nodes=(\d+) run_op_calls_ok=(\d+) run_op_calls_failed=(\d+)", text)
t = re.search(r"Replay time per iteration: ([0-9.]+) ms", text)
etr = f"{int(w[1]) - int(w[2])} of {w[1]} ({w[2]}; {w[4]} of {int(w[3]) + int(w[4])} runs failed)" if w else "did not run"
etr_ms = f"{float(t[1]):.2f}" if t else "-"
r = json.load(open(report))
s = r["summary"]
# Of the 10 ops (by name) with the most recorded time, how many are among replay's 10.
by_ms, by_recorded = {}, {}
for n in r["nodes"]:
    by_ms[n["name"]] = by_ms.get(n["name"], 0) + n["ms"]
    by_recorded[n["name"]] = by_recorded.get(n["name"], 0) + (n["recorded_ms"] or 0)
top = lambda d: set(sorted(d, key=lambda k: -d[k])[:10])
kept = len(top(by_ms) & top(by_recorded))
# The next step recorded by Kineto alone: each call found there by its place among the window's
# cpu_op events (per thread, in time order; the two steps call the same ops, names checked), its
# duration beside the one recorded with the observer.
alone_ms, alone_kept = "-", "-"
kineto_with = report.replace(".optrace.json", ".pt.trace.json")
if os.path.exists(alone):
    def ops(path):
        events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
        return events
    with_et, without = ops(kineto_with), ops(alone)
    place = {e["args"].get("Record function id"): k for k, e in enumerate(with_et)}
    by_alone, by_op, total, found = {}, {}, 0.0, 0
    for n in r["nodes"]:
        k = place.get(n["rf_id"])
        if k is None or k >= len(without) or without[k]["name"] != with_et[k]["name"]:
            continue
        found += 1
        total += without[k]["dur"] / 1000
        by_alone[n["name"]] = by_alone.get(n["name"], 0) + without[k]["dur"] / 1000
        by_op[n["name"]] = by_op.get(n["name"], 0) + n["ms"]
    if found:
        alone_ms = f"{total:.2f} ({found} calls; replayed {sum(by_op.values()):.2f})"
        alone_kept = f"{len(top(by_op) & top(by_alone))} of {min(10, len(by_op))}"
print(f"| {model} | {nodes} | {etr} | {etr_ms} | {s['ok']} of {s['calls']} ({s['skipped']}, {s['error']}) | "
      f"{s['shared_inputs']} / {s['external_tensors']} | {s['total_ms']:.2f} | {s['recorded_ms']:.2f} | {kept} of {min(10, len(by_ms))} | "
      f"{alone_ms} | {alone_kept} |")
EOF
done
