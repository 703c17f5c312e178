# The real consumers on the traces of a gloo job of WORLD ranks (default 2; tests/distributed/gloo_ranks.cpp,
# under a Profiler or an OnDemandProfiler):
#  - HTA's TraceAnalysis loads the Kineto trace folder (directory mode, as a user runs it) as ranks
#    0..WORLD-1, each file under the rank its "distributedInfo" gives (HTA's regex `"rank":\s+(\d+)`),
#    with the gloo:all_reduce ranges and ProfilerStep#N of each rank in its event table;
#  - Chakra's converter converts each rank's host execution trace, keeping the record_param_comms
#    and "## process_group:init ##" nodes, and param's et_replay reads the collective's attributes
#    (collective_name, in_msg_nelems, pg_name, ...) from the record_param_comms nodes; where the
#    job wrote execution traces (GLOO_RANKS_OUT/et; the slow-step jobs write none).
# Chakra's converter makes COMM_COLL nodes only of GPU kernels (nccl*Kernel, after trace_link): a
# CPU gloo trace, torch's own included, converts to COMP nodes only; that is checked, not hidden.
# Exits 1 on a difference, 77 where the consumers cannot run, with the reason on the first line.
# usage: python3 distributed_consumers_check.py CONSUMERS_DIR GLOO_RANKS_OUT WORK_DIR [WORLD]
import glob
import logging
import os
import shutil
import subprocess
import sys
import warnings

import pinned_consumers

consumers, out, work = (os.path.abspath(p) for p in sys.argv[1:4])
world = int(sys.argv[4]) if len(sys.argv) > 4 else 2
pinned_consumers.require(consumers, "hta", "HTA")
pinned_consumers.require(consumers, "chakra", "Chakra")
pinned_consumers.add_hta_to_path(consumers)
try:
    import google.protobuf  # noqa: F401
    import pandas  # noqa: F401
    from et_replay.execution_trace import ExecutionTrace
    from hta.trace_analysis import TraceAnalysis
except ImportError as e:
    print(f"SKIPPED: HTA or Chakra cannot run here: {e} (the trixie stage installs python3-pandas, python3-protobuf and the others)")
    sys.exit(77)
if shutil.which("protoc") is None:
    print("SKIPPED: Chakra cannot run here: no protoc (apt-get install protobuf-compiler)")
    sys.exit(77)
logging.getLogger("hta").setLevel(logging.ERROR)
warnings.simplefilter("ignore", FutureWarning)

failures = []


def check(ok, what):
    print(("ok: " if ok else "DIFFERENCE: ") + what)
    if not ok:
        failures.append(what)


ta = TraceAnalysis(trace_dir=os.path.join(out, "kineto"))
ranks = sorted(ta.t.get_ranks())
check(ranks == list(range(world)), f"HTA loads the folder as ranks {list(range(world))}: {ranks}")
names = ta.t.symbol_table.get_sym_table()
for rank in ranks:
    df = ta.t.get_trace(rank)
    in_table = {names[i] for i in df["name"].unique()}
    check("gloo:all_reduce" in in_table, f"rank {rank}: gloo:all_reduce in HTA's event table")
    check(any(n.startswith("ProfilerStep#") for n in in_table), f"rank {rank}: ProfilerStep#N in HTA's event table")

if not os.path.isdir(os.path.join(out, "et")):
    sys.exit(1 if failures else 0)
env = pinned_consumers.chakra_package(consumers, work)
for rank in range(world):
    found = sorted(glob.glob(os.path.join(out, "et", f"rank{rank}.*et.json")))
    check(len(found) == 1, f"rank {rank}: one execution trace in {out}/et: {found}")
    if len(found) != 1:
        continue
    et = found[0]
    trace = ExecutionTrace(__import__("json").load(open(et)))
    comms = [n for n in trace.nodes.values() if n.name == "record_param_comms"]
    # Each call's group as the rank's Kineto trace lists its groups (the world, and in the groups
    # job its pair): et_replay must read the size of the group the call names.
    kineto = glob.glob(os.path.join(out, "kineto", f"rank{rank}.*.pt.trace.json"))
    sizes = {g["pg_name"]: g["pg_size"] for g in __import__("json").load(open(kineto[0]))["distributedInfo"]["pg_config"]} if kineto else {}
    check(len(comms) > 0 and all(n.commArgs.collective_name == "allreduce" and n.commArgs.pg_size == sizes.get(n.commArgs.pg_name)
                                 and n.commArgs.in_msg_nelems > 0 for n in comms),
          f"rank {rank}: et_replay reads {len(comms)} record_param_comms nodes with their collective's attributes, "
          f"groups {sorted({n.commArgs.pg_name for n in comms})} of sizes {sizes}")
    chakra_out = os.path.join(work, f"rank{rank}.chakra")
    r = subprocess.run([sys.executable, "-m", "chakra.src.converter.converter", "PyTorch", "--input", et,
                        "--output", chakra_out], cwd=work, env=env, capture_output=True, text=True)
    check(r.returncode == 0, f"rank {rank}: Chakra's converter converts the execution trace "
                             f"(rc {r.returncode}) {(r.stdout + r.stderr).strip()[-300:]}")
    sys.path.insert(0, work)
    from chakra.schema.protobuf.et_def_pb2 import COMM_COLL_NODE, GlobalMetadata, Node  # noqa: E402
    from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd  # noqa: E402
    if r.returncode == 0:
        f = openFileRd(chakra_out)
        decodeMessage(f, GlobalMetadata())
        converted, node = [], Node()
        while decodeMessage(f, node):
            converted.append((node.name, node.type))
        f.close()
        kept = {n for n, _ in converted}
        host = {n["name"] for n in __import__("json").load(open(et))["nodes"]}
        print(f"rank {rank}: host nodes the Chakra ET leaves out: {sorted(host - kept)}")
        check({"record_param_comms", "gloo:all_reduce", "## process_group:init ##"} <= kept,
              f"rank {rank}: the Chakra ET keeps the collective's and the groups' nodes")
        coll = sum(1 for _, t in converted if t == COMM_COLL_NODE)
        print(f"rank {rank}: {len(converted)} Chakra nodes, {coll} COMM_COLL (CPU: none expected, see above)")

sys.exit(1 if failures else 0)
