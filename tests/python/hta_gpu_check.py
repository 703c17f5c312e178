# HTA (Holistic Trace Analysis, the pinned copy in ../shared/consumers/hta) on a Kineto trace of a
# CUDA run: TraceAnalysis loads a folder holding the trace (directory mode, as a user runs it), and
#  - get_gpu_kernel_breakdown() lists every kernel, copy and set of the file by name, with the sum,
#    max and min of the durations the file gives them;
#  - get_cuda_kernel_launch_stats() pairs each of them with the runtime call that launched it (the
#    same `correlation`), with both durations and the launch delay the file's times give;
#  - get_memory_bw_summary() shows the bandwidth of the copies and sets that carry their bytes.
# HTA reads times in whole microseconds: it rounds a start up and an end down (ceil(ts),
# floor(ts + dur)), so a kernel under a microsecond can last 0 or -1; the expected values here are
# the file's own events rounded the same way. Run on optrace's GPU trace and on torch's own.
# Prints what it checked; exits 1 on a difference, 77 where HTA cannot run (no pandas), with the
# reason on the first line.
# usage: python3 hta_gpu_check.py CONSUMERS_DIR TRACE.pt.trace.json[.gz] WORK_DIR
import collections
import gzip
import json
import math
import os
import shutil
import sys

import pinned_consumers

consumers, trace, work = (os.path.abspath(p) for p in sys.argv[1:4])
TraceAnalysis = pinned_consumers.hta_trace_analysis(consumers)
from hta.utils.utils import get_kernel_type  # noqa: E402 (importable once HTA is)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("DIFFERENCE:", what)


# HTA's directory mode reads every trace of the folder: a folder of our own with only this one.
folder = os.path.join(work, "trace")
shutil.rmtree(folder, ignore_errors=True)
os.makedirs(folder)
shutil.copy(trace, folder)
with (gzip.open if trace.endswith(".gz") else open)(trace, "rt") as f:
    events = json.load(f)["traceEvents"]


def rounded(e):  # (start, duration) in HTA's whole microseconds
    start, end = math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"])
    return start, end - start


# What the file holds: the device's kernels, copies and sets (HTA finds them by their stream) and
# the calls on the host.
gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
calls = {e["args"]["correlation"]: e for e in events
         if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
print(f"{os.path.basename(trace)}: {len(gpu)} device events",
      dict(collections.Counter(e["cat"] for e in gpu)), f"{len(calls)} runtime and driver calls")
check(len(gpu) > 0, "the trace holds no kernels, copies or sets")
unlaunched = [e["name"][:80] for e in gpu if e["args"].get("correlation") not in calls]
check(not unlaunched, f"device events without a runtime call of the same correlation in the file: {unlaunched}")

ta = TraceAnalysis(trace_dir=folder)  # no distributedInfo in the file: HTA takes it as rank 0
check(list(ta.t.traces) == [0], f"HTA's ranks: {list(ta.t.traces)}, expected [0]")
df = ta.t.get_trace(0)
check(int((df["stream"] != -1).sum()) == len(gpu),
      f"HTA's event table holds {int((df['stream'] != -1).sum())} device events, the file {len(gpu)}")

# 1. The kernel breakdown: every device event, by name (nothing folded into "others").
types, kernels = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=len(gpu) + 1,
                                             include_memory_kernels=True)
expected = collections.defaultdict(list)
for e in gpu:
    expected[(e["name"], get_kernel_type(e["name"]))].append(rounded(e)[1])
expected = {k: v for k, v in expected.items() if k[1] != "OTHER"}  # HTA's breakdown leaves its OTHER kind out
found = {(name, kind): (int(total), int(most), int(least)) for name, kind, total, most, least
         in kernels[["name", "kernel_type", "sum (us)", "max (us)", "min (us)"]].itertuples(index=False, name=None)}
want = {k: (sum(v), max(v), min(v)) for k, v in expected.items()}
check(set(found) == set(want), f"kernel names: HTA only {sorted(n[:80] for n, _ in set(found) - set(want))}, "
      f"the file only {sorted(n[:80] for n, _ in set(want) - set(found))}")
for k in sorted(set(found) & set(want)):
    check(found[k] == want[k], f"{k[0][:80]}: HTA (sum, max, min) {found[k]}, the file {want[k]}")
# (The time per kind, HTA's first table, is the union of the kind's intervals: printed, not compared.)
hta_types = {kind: int(total) for kind, total in types[["kernel_type", "sum"]].itertuples(index=False, name=None)}
print(f"HTA kernel breakdown: {len(found)} names, {sum(len(v) for v in expected.values())} events, sum, max and min",
      "per name as in the file; time per kind:", ", ".join(f"{k} {v} us" for k, v in sorted(hta_types.items())))

# 2. Launch statistics: each device event with the call that launched it, by correlation. HTA counts
# the launches named here (cuda_kernel_analysis.py); a kernel launched otherwise (cuLaunchKernel) is
# not in its table.
launch_names = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                "runFunction - job_prep_and_submit_for_execution"}
rows = []
for e in gpu:
    call = calls.get(e["args"].get("correlation"))
    if call is None or call["name"] not in launch_names:
        continue
    (cpu_ts, cpu_dur), (gpu_ts, gpu_dur) = rounded(call), rounded(e)
    rows.append((e["args"]["correlation"], cpu_dur, gpu_dur, max(0, gpu_ts - cpu_ts - cpu_dur)))
stats = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
got = sorted(tuple(int(x) for x in row) for row in
             stats[["correlation", "cpu_duration", "gpu_duration", "launch_delay"]].itertuples(index=False, name=None))
rows.sort()
check(got == rows, "launch statistics (correlation, cpu_duration, gpu_duration, launch_delay):\n  HTA  "
      f"{[r for r in got if r not in rows]}\n  file {[r for r in rows if r not in got]}")
others = collections.Counter(calls[e["args"]["correlation"]]["name"] for e in gpu
                             if e["args"].get("correlation") in calls and calls[e["args"]["correlation"]]["name"] not in launch_names)
print(f"HTA launch statistics: {len(got)} device events paired with their launch by correlation",
      f"(cpu {sum(r[1] for r in got)} us, gpu {sum(r[2] for r in got)} us, launch delay {sum(r[3] for r in got)} us, as in the file)"
      + (f"; launched by calls HTA does not count: {dict(others)}" if others else ""))

# 3. Memory bandwidth, where the file's copies and sets carry CUPTI's "bytes" and "memory bandwidth
# (GB/s)" (torch's traces; optrace's from libtorch's saved trace, detail/profiler/device_details.hpp):
# get_memory_bw_summary() has a row per kind of copy (HTA's names: "Memcpy DtoH", "Memset", ...)
# that moved bytes. Its figures are of the series HTA sums over overlapping copies, so each kind's
# largest is at least that of its fastest copy in the file.
with_bytes = [e for e in gpu if e["cat"] != "kernel" and "bytes" in e["args"]]
if with_bytes:
    from hta.utils.utils import get_memory_kernel_type
    fastest = {}
    for e in with_bytes:
        bw = e["args"].get("memory bandwidth (GB/s)", 0)
        if bw > 0:
            kind = get_memory_kernel_type(e["name"])
            fastest[kind] = max(fastest.get(kind, 0), bw)
    summary = ta.get_memory_bw_summary(ranks=[0])
    kinds = {} if summary is None else {name: row[("memory_bw_gbps", "max")] for (_, name), row in summary.iterrows()}
    check(sorted(kinds) == sorted(fastest), f"HTA's memory bandwidth kinds {sorted(kinds)}, the file's {sorted(fastest)}")
    check(all(kinds.get(k, 0) >= v * (1 - 1e-9) for k, v in fastest.items()),
          f"HTA's largest bandwidth per kind {kinds} below the file's fastest copy {fastest}")
    print(f"HTA memory bandwidth: {len(with_bytes)} copies and sets with bytes; largest GB/s per kind",
          {k: round(float(v), 3) for k, v in sorted(kinds.items())})
else:
    print("HTA memory bandwidth: no copy or set in the file carries bytes")

if failures:
    print(f"{len(failures)} difference(s)")
    sys.exit(1)
print("HTA: kernels, durations, launches and bandwidth as in the file")
