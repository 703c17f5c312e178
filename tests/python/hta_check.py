# HTA (Holistic Trace Analysis, the pinned copy in ../shared/consumers/hta) on a trace folder that
# optrace's tensorboard_trace_handler wrote: TraceAnalysis loads the folder, finds the profiler
# steps, and its event table holds each op of the steps it analyses with the duration the file
# gives it. Prints what it checked; exits 1 on a difference, 77 where HTA cannot run (no pandas).
# usage: python3 hta_check.py CONSUMERS_DIR TRACE_DIR STEP...
import glob
import gzip
import json
import os
import sys

import pinned_consumers

consumers, trace_dir = sys.argv[1], os.path.abspath(sys.argv[2])
expected_steps = [int(s) for s in sys.argv[3:]]
pinned_consumers.require(consumers, "hta", "HTA")
pinned_consumers.add_hta_to_path(consumers)
try:
    import pandas  # noqa: F401
    from hta.trace_analysis import TraceAnalysis
except ImportError as e:
    print(f"HTA cannot run here: {e}")
    sys.exit(77)

files = glob.glob(os.path.join(trace_dir, "*.pt.trace.json*"))
assert len(files) == 1, files
with (gzip.open if files[0].endswith(".gz") else open)(files[0], "rt") as f:
    events = json.load(f)["traceEvents"]

ta = TraceAnalysis(trace_dir=trace_dir)  # directory mode, as a user runs it
steps = ta.get_profiler_steps()
print("HTA profiler steps:", steps)
# HTA leaves out the last step when there are two or more (../shared/consumers/README.md).
assert steps == expected_steps[:-1] if len(expected_steps) > 1 else expected_steps, (steps, expected_steps)

df = ta.t.get_trace(0)
names = ta.t.symbol_table.get_sym_table()
table = [(names[int(r.name)], int(r.ts), int(r.dur)) for r in df.itertuples() if names[int(r.cat)] == "cpu_op"]
print("HTA cpu_op events:", len(table))
assert len(table) > 10, table

# HTA keeps the ops of the steps it analyses (times shifted to the trace's start, in integer
# microseconds): per op name, the same calls with the durations the file gives them.
spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
         if e.get("name", "").startswith("ProfilerStep#") and int(e["name"].split("#")[1]) in steps]
within = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
          and any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in spans)]
print("file cpu_op events in those steps:", len(within))
hta_durs, file_durs = {}, {}
for name, _, dur in table:
    hta_durs.setdefault(name, []).append(dur)
for e in within:
    file_durs.setdefault(e["name"], []).append(e["dur"])
assert sorted(hta_durs) == sorted(file_durs), (sorted(hta_durs), sorted(file_durs))
for name in file_durs:
    a, b = sorted(hta_durs[name]), sorted(file_durs[name])
    assert len(a) == len(b), (name, len(a), len(b))
    assert all(abs(x - y) <= 2 for x, y in zip(a, b)), (name, a[:5], b[:5])  # HTA rounds ts and end to whole us
print("HTA op breakdown:", len(file_durs), "ops,", len(within), "calls, durations as in the file")
