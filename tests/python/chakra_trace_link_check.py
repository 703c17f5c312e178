# chakra_trace_link (the pinned copy of Chakra in ../shared/consumers/chakra) on the host execution
# trace and the Kineto trace of one CUDA run: `python3 -m chakra.src.trace_link.trace_link` must
# link them, and the linked trace it writes must hold, under each host op that launched GPU work,
# one GPU node per kernel and copy the Kineto trace attributes to that op (the kernel's `correlation`
# names its runtime call, the call's `External id` its op, the op's `Record function id` the host
# node's `rf_id`), with the kernel's name, category, start, duration and stream; and each host op
# the start and duration of its Kineto op. Exits 1 on a difference, 77 where Chakra cannot run (no
# pandas, networkx, protobuf or protoc), with the reason on the first line.
# With --cpu (a CPU run of a distributed job, no kernels): each record_param_comms host node, which
# optrace writes for a gloo collective, must be timed from the Kineto record_param_comms of its
# rf_id (the link Chakra joins a collective's node to its Kineto event by). trace_link cannot run
# on a CPU trace as it is, torch's own included: it asks HTA's critical path for the
# synchronization edges between CPU and GPU, which asserts on a trace without GPU work ("Queue
# length time series is required"); its TraceLinker is run with those edges empty (a CPU trace
# has none), the rest of it unchanged.
# usage: python3 chakra_trace_link_check.py CONSUMERS_DIR HOST_ET.json[.gz] KINETO.json[.gz] WORK_DIR [--cpu]
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys

import pinned_consumers

consumers, et_path, kineto_path, work = (os.path.abspath(p) for p in sys.argv[1:5])
cpu_only = sys.argv[5:] == ["--cpu"]
pinned_consumers.require(consumers, "chakra", "chakra_trace_link")
missing = []
for module in ("pandas", "networkx", "google.protobuf"):  # HTA's critical path (pandas, networkx); Chakra's schema
    try:
        __import__(module)
    except ImportError:
        missing.append(module)
if missing or shutil.which("protoc") is None:
    print("SKIPPED: chakra_trace_link cannot run here: "
          + "; ".join(([f"no Python module {', '.join(missing)}"] if missing else []) + ([] if shutil.which("protoc") else ["no protoc"]))
          + " (the trixie stage installs python3-pandas, python3-networkx, python3-protobuf, protobuf-compiler)")
    sys.exit(77)

# Chakra importable from WORK_DIR; the traces as plain JSON there (trace_link reads the host trace
# with open()), by absolute paths.
env = pinned_consumers.chakra_package(consumers, work)


def load_plain(src, name):  # the trace as a dict, and a plain-JSON copy of it in WORK_DIR
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        text = f.read()
    dst = os.path.join(work, name)
    with open(dst, "w") as f:
        f.write(text)
    return json.loads(text), dst


host, host_file = load_plain(et_path, "host_et.json")
kineto, kineto_file = load_plain(kineto_path, "kineto.pt.trace.json")
out = os.path.join(work, "linked.json")
if os.path.exists(out):
    os.remove(out)
if cpu_only:
    linker = ("import sys\nfrom chakra.src.trace_link.trace_linker import TraceLinker\nlinker = TraceLinker()\n"
              "linker.load_sync_dependencies = lambda *args, **kwargs: {}\nlinker.link(0, *sys.argv[1:4])\n")
    command = [sys.executable, "-c", linker, host_file, kineto_file, out]
else:
    command = [sys.executable, "-m", "chakra.src.trace_link.trace_link", "--rank", "0", "--chakra-host-trace", host_file,
               "--chakra-device-trace", kineto_file, "--output-file", out]
r = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
log = (r.stdout + r.stderr).strip()
print("chakra_trace_link: rc", r.returncode, log.splitlines()[-1] if log else "")
events = kineto["traceEvents"]
if r.returncode != 0 or not os.path.exists(out):
    print(log[-3000:])
    if "Could not find annotation ProfilerStep" in log:
        # trace_link asks HTA's critical-path analysis for the first "ProfilerStep" range (its
        # synchronization edges) and does not handle the None HTA returns without one.
        steps = [e["name"] for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
        print(f"DIFFERENCE: chakra_trace_link needs a ProfilerStep#N range in the Kineto trace (HTA's critical path "
              f"of its first step); this trace has {len(steps)}: record the window as a profiler step")
    sys.exit(1)

# What the two files say, without Chakra: for each kernel and copy (trace_link links `kernel` and
# `gpu_memcpy`), its runtime call by correlation, the call's op by External id (on the call's
# thread), and the host node of that op's Record function id.
xs = [e for e in events if e.get("ph") == "X"]
calls = {e["args"]["correlation"]: e for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")}
ops = {(e["tid"], e["args"]["External id"]): e for e in xs if e.get("cat") in ("cpu_op", "user_annotation")}
# (trace_link times the host ops from these, ProfilerStep ranges left out: kineto_operator.py)
ops_by_rf = {e["args"]["Record function id"]: e for e in ops.values()
             if "Record function id" in e["args"] and "ProfilerStep" not in e["name"]}


def attrs(node):
    return {a["name"]: a["value"] for a in node.get("attrs", [])}


host_by_rf = {attrs(n)["rf_id"]: n for n in host["nodes"] if not n["name"].startswith("[pytorch|profiler|execution_trace|")}
expected = collections.defaultdict(list)  # rf_id -> [(name, cat, ts, dur, stream)]
gpu = [e for e in xs if e.get("cat") in ("kernel", "gpu_memcpy")]
for e in gpu:
    call = calls.get(e["args"]["correlation"])
    op = ops.get((call["tid"], call["args"]["External id"])) if call else None
    rf = op["args"].get("Record function id") if op else None
    if rf not in host_by_rf:
        print(f"DIFFERENCE: the files do not attribute {e['name'][:80]} to a host op (call {call and call['name']}, "
              f"op {op and op['name']}, rf_id {rf})")
        sys.exit(1)
    expected[rf].append((e["name"], e["cat"], e["ts"], e["dur"], e["args"].get("stream")))

# What trace_link wrote: the host nodes (renumbered) and a node per GPU op, its ctrl_deps the host op.
linked = json.load(open(out))["nodes"]
by_id = {n["id"]: n for n in linked}
gpu_nodes = [n for n in linked if n.get("cat") in ("kernel", "gpu_memcpy")]
found = collections.defaultdict(list)
failures = []
for n in gpu_nodes:
    parent = by_id.get(n["ctrl_deps"])
    rf = attrs(parent).get("rf_id") if parent else None
    found[rf].append((n["name"], n["cat"], n["ts"], n["inclusive_dur"], n["stream"]))
    if n["inclusive_dur"] != n["exclusive_dur"] or n.get("ph") != "X" or attrs(n).get("rf_id") != rf:
        failures.append(f"GPU node {n['id']} ({n['name'][:60]}): ph {n.get('ph')}, inclusive {n['inclusive_dur']}, "
                        f"exclusive {n['exclusive_dur']}, rf_id {attrs(n).get('rf_id')} under a host op of rf_id {rf}")
for rf in sorted(set(expected) | set(found), key=lambda x: (x is None, x)):
    a, b = sorted(expected.get(rf, [])), sorted(found.get(rf, []))
    if a != b:
        failures.append(f"host op rf_id {rf} ({host_by_rf[rf]['name'] if rf in host_by_rf else '?'}):\n"
                        f"  the files: {[(x[0][:50],) + x[1:] for x in a]}\n  linked:    {[(x[0][:50],) + x[1:] for x in b]}")

# Every host op kept, those with a Kineto op given its start and duration.
linked_host = [n for n in linked if "cat" not in n]
timed = comms_timed = 0
for n in linked_host:
    rf = attrs(n).get("rf_id")
    if n["name"].startswith("[pytorch|profiler|execution_trace|") or rf not in ops_by_rf:
        continue
    k = ops_by_rf[rf]
    timed += 1
    if n["name"] == "record_param_comms":
        comms_timed += 1
    if (n.get("ts"), n.get("inclusive_dur")) != (k["ts"], k["dur"]) or n["name"] != k["name"]:
        failures.append(f"host op rf_id {rf} {n['name']}: ts {n.get('ts')}, inclusive_dur {n.get('inclusive_dur')}; "
                        f"the Kineto op {k['name']}: ts {k['ts']}, dur {k['dur']}")
if len(linked_host) != len(host["nodes"]):
    failures.append(f"host nodes: {len(host['nodes'])} in the execution trace, {len(linked_host)} in the linked trace")

for rf in sorted(found, key=lambda x: (x is None, x)):
    name = host_by_rf[rf]["name"] if rf in host_by_rf else "?"
    print(f"  {name} (rf_id {rf}): " + ", ".join(f"{k[1]} {k[0][:40]}... {k[3]} us" for k in sorted(found[rf], key=lambda k: k[2])))
print(f"linked trace: {len(linked_host)} host nodes ({timed} timed from the Kineto trace), {len(gpu_nodes)} GPU nodes "
      f"under {len(found)} host ops; the Kineto trace: {len(gpu)} kernels and copies")
comms = [n for n in host["nodes"] if n["name"] == "record_param_comms"]
if cpu_only:
    print(f"record_param_comms: {len(comms)} host nodes, {comms_timed} timed from the Kineto trace's by rf_id")
    if not comms or comms_timed != len(comms):
        failures.append(f"{len(comms)} record_param_comms host nodes, {comms_timed} linked to a Kineto record_param_comms")
elif not gpu:
    failures.append("the Kineto trace holds no kernels or copies")
for f in failures:
    print("DIFFERENCE:", f)
if failures:
    sys.exit(1)
print("chakra_trace_link: every record_param_comms linked to its Kineto event" if cpu_only else
      "chakra_trace_link: every kernel and copy under the host op that launched it, with the file's times")
