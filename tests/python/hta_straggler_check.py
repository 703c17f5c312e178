# HTA's straggler view (the pinned copy in ../shared/consumers/hta) against `optrace summary --by
# rank` on the real traces of an 8-GPU NCCL job (tests/data/distributed_nccl_dlrm/): HTA's
# TraceAnalysis.get_potential_stragglers(num_candidates=1) names the rank whose last long NCCL
# kernel started latest; optrace names the rank the others waited for most, its calls timed by
# their NCCL kernels. The two are computed differently (HTA: one kernel's start, scaled by the
# iteration; optrace: every collective's waits, matched across ranks), from the same kernels: they
# must name the same rank. Prints both; exits 1 where they differ, 77 where HTA cannot run.
# usage: python3 hta_straggler_check.py CONSUMERS_DIR TRACE_DIR OPTRACE_CLI
import json
import os
import subprocess
import sys

import pinned_consumers

consumers, folder, cli = (os.path.abspath(p) for p in sys.argv[1:4])
TraceAnalysis = pinned_consumers.hta_trace_analysis(consumers)

# Both read the folder as a user gives it: its *.json and *.json.gz files (HTA's directory mode).
summary = json.loads(subprocess.run([cli, "summary", "--by", "rank", folder, "--json"], check=True, capture_output=True,
                                    text=True).stdout)
ranks = summary["waits"]["ranks"]
most = max(ranks, key=lambda r: (r["caused_us"], -r["rank"]))
on_device = sum(c["on_device"] for c in summary["waits"]["collectives"])
print(f"optrace: rank {most['rank']} kept the others waiting longest ({most['caused_us'] / 1000:.3f} ms at {most['blamed']} "
      f"collective(s)); {on_device} of {len(summary['waits']['collectives'])} collectives timed by their NCCL kernels")

analysis = TraceAnalysis(trace_dir=folder)
hta = [int(r) for r in analysis.get_potential_stragglers(num_candidates=1, visualize=False)]
print(f"HTA: potential straggler(s) {hta} (steps {[int(s) for s in analysis.get_profiler_steps()]})")

failures = []
if on_device != len(summary["waits"]["collectives"]) or on_device == 0:
    failures.append("optrace did not time every collective by its kernels")
if most["caused_us"] <= 0:
    failures.append("optrace blamed no rank")
if hta != [most["rank"]]:
    failures.append(f"HTA names {hta}, optrace rank {most['rank']}")
for f in failures:
    print("DIFFERENCE:", f)
sys.exit(1 if failures else 0)
