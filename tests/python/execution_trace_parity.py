# torch's own ExecutionTraceObserver (torch >= 2) around a TorchScript function, as
# tests/test_profiler.cpp runs the same function under optrace::Profiler with execution_trace():
# the two host execution traces must hold the same nodes, node for node.
# usage: python3 execution_trace_parity.py SOURCE.ts INPUTS.pt CALLS OURS.json THEIRS.json
# INPUTS.pt: the inputs the C++ test saved with torch::pickle_save (a tuple of tensors). The calls:
# CALLS under no_grad, then one with the second and third inputs requiring grad, whose first
# output's sum runs backward (the gradient's seed made before recording). Writes torch's trace to
# THEIRS.json. Exits 1 on a difference (each printed), 77 where torch has no
# ExecutionTraceObserver that writes schema 1.1.1 (torch < 2).
#
# Compared per node, in id order (both number nodes as they begin): name, parent's name, and
# inputs and outputs (types, shapes, strides, values), and the attrs op_schema, scope, seq_id,
# tid, fw_tid and fw_parent. Some are numbers of the run, compared by what they relate:
# - tensor and storage ids come from one counter shared with the nodes, keyed by address, and a
#   freed tensor's address is reused by the next, differently in two processes. A tensor value
#   [tensor_id, storage_id, offset, numel, itemsize, device] is compared with its ids renumbered
#   within the node (first seen, 0, 1, ...): which of a node's tensors are the same tensor, or
#   share storage, must agree;
# - seq_id (autograd's sequence number, a per-thread counter) and tid are renumbered in the order
#   first seen over the trace (-1 stays): a backward node must carry its forward op's number;
# - fw_tid is compared as 0, the node's own tid, or another; fw_parent by its node's name.
# rf_id is RecordFunction's handle of the run.
import json
import sys

import torch

source, inputs_path, calls, ours_path, theirs_path = sys.argv[1:6]
if int(torch.__version__.split(".")[0]) < 2 or not hasattr(torch.profiler, "ExecutionTraceObserver"):
    print(f"torch {torch.__version__} has no ExecutionTraceObserver writing schema 1.1.1")
    sys.exit(77)

cu = torch.jit.CompilationUnit(open(source).read())
inputs = list(torch.load(inputs_path))
seed = torch.ones(())
et = torch.profiler.ExecutionTraceObserver()
et.register_callback(theirs_path)
# As the C++ side: the graph executor unoptimized (torch::jit::setGraphExecutorOptimize(false)).
with torch.jit.optimized_execution(False):
    et.start()
    with torch.no_grad():
        for _ in range(int(calls)):
            cu.forward(*inputs)
    for t in inputs[1:3]:
        t.requires_grad_(True)
    cu.forward(*inputs)[0].sum().backward(seed)
    et.stop()
et.unregister_callback()


def canonical(values, types, ids):
    """values with each tensor's [tensor_id, storage_id] renumbered in `ids` (per node)."""
    if isinstance(types, str) and types.startswith("Tensor(") and isinstance(values, list) and len(values) == 6:
        t = ids.setdefault(("t", values[0]), len(ids))
        s = ids.setdefault(("s", values[1]), len(ids))
        return [t, s] + values[2:]
    if isinstance(values, list):
        inner = types[types.index("[") + 1:-1] if isinstance(types, str) and "[" in types else ""
        item_types = split_types(inner) if inner else [None] * len(values)
        return [canonical(v, t, ids) for v, t in zip(values, item_types + [None] * (len(values) - len(item_types)))]
    return values


def split_types(text):
    """'Tensor(float),GenericList[Int,Int]' -> ['Tensor(float)', 'GenericList[Int,Int]']."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return out + [text[start:]]


def rows(path):
    nodes = sorted(json.load(open(path))["nodes"], key=lambda n: n["id"])
    by_id = {n["id"]: n for n in nodes}
    seq_ids, tids = {-1: -1}, {}
    out = []
    for n in nodes:
        if n["name"].startswith("[pytorch|profiler|execution_trace|"):
            continue
        attrs = {a["name"]: a["value"] for a in n["attrs"]}
        ids = {}
        fw_tid = attrs.get("fw_tid")
        fw_parent = attrs.get("fw_parent")
        row = {"name": n["name"], "parent": by_id[n["ctrl_deps"]]["name"],
               "op_schema": attrs.get("op_schema"), "scope": attrs.get("scope"),
               "seq_id": seq_ids.setdefault(attrs.get("seq_id"), len(seq_ids) - 1),
               "tid": tids.setdefault(attrs.get("tid"), len(tids)),
               "fw_tid": 0 if fw_tid == 0 else "own" if fw_tid == attrs.get("tid") else "other",
               "fw_parent": by_id[fw_parent]["name"] if fw_parent in by_id else fw_parent}
        for side in ("inputs", "outputs"):
            v = n[side]
            row[side] = {"types": v["types"], "shapes": v["shapes"], "strides": v["strides"],
                         "values": [canonical(x, t, ids) for x, t in zip(v["values"], v["types"])]}
        out.append(row)
    return out


ours, theirs = rows(ours_path), rows(theirs_path)
print(f"optrace: {len(ours)} nodes, torch: {len(theirs)} nodes")
# What the function is there to exercise must be in torch's trace, or the comparison proves little.
seen = {t.split("[")[0].split("(")[0] for r in theirs for side in ("inputs", "outputs") for t in r[side]["types"]}
missing = {"Tensor", "GenericList", "Int", "Double", "Bool", "String", "Device", "None"} - seen
backward = sum(1 for r in theirs if r["scope"] == 1)  # at::RecordScope::BACKWARD_FUNCTION
if len(theirs) < 20 or missing or backward == 0:
    print(f"torch's trace lacks what the test needs: {len(theirs)} nodes, {backward} autograd nodes, no {sorted(missing)}")
    sys.exit(1)
differences = 0
for i in range(max(len(ours), len(theirs))):
    a = ours[i] if i < len(ours) else None
    b = theirs[i] if i < len(theirs) else None
    if a == b:
        continue
    differences += 1
    if differences <= 20:
        print(f"node {i}:")
        for key in (b or a):
            if a is None or b is None or a.get(key) != b.get(key):
                print(f"  {key}: optrace {json.dumps(a and a.get(key))}\n  {' ' * len(key)}  torch   {json.dumps(b and b.get(key))}")
print(f"{differences} nodes differ")
sys.exit(1 if differences else 0)
