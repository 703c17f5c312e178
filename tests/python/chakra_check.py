# Chakra's converter (the pinned copy in ../shared/consumers/chakra) on a host execution trace:
# `chakra.src.converter.converter PyTorch` must convert it, and the Chakra ET it writes must hold
# one node per host op of the trace (what the converter reads back with Chakra's own protobuf
# decoder). Exits 1 on a difference, 77 where Chakra cannot run (no protobuf or protoc).
# usage: python3 chakra_check.py CONSUMERS_DIR HOST_ET.json WORK_DIR
import collections
import json
import os
import shutil
import subprocess
import sys

import pinned_consumers

consumers, et_path, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
pinned_consumers.require(consumers, "chakra", "Chakra")
try:
    import google.protobuf  # noqa: F401
except ImportError as e:
    print(f"Chakra cannot run here: {e}")
    sys.exit(77)
if shutil.which("protoc") is None:
    print("Chakra cannot run here: no protoc")
    sys.exit(77)

env = pinned_consumers.chakra_package(consumers, work)
out = os.path.join(work, "host.et")
r = subprocess.run([sys.executable, "-m", "chakra.src.converter.converter", "PyTorch", "--input", et_path, "--output", out],
                   cwd=work, env=env, capture_output=True, text=True)
print("chakra converter: rc", r.returncode, (r.stdout + r.stderr).strip()[-400:])
assert r.returncode == 0

# Read the Chakra ET back with Chakra's own decoder.
sys.path.insert(0, work)
from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node  # noqa: E402
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd  # noqa: E402

f = openFileRd(out)
decodeMessage(f, GlobalMetadata())
converted = []
node = Node()
while decodeMessage(f, node):
    converted.append(node.name)
f.close()

# Every node but the process root, and thread nodes with no op under them (the converter drops
# what nothing depends on).
host = json.load(open(et_path))["nodes"]
parents = {n["ctrl_deps"] for n in host if n["id"] != n["ctrl_deps"]}
ops = [n["name"] for n in host if n["name"] != "[pytorch|profiler|execution_trace|process]"
       and (n["name"] != "[pytorch|profiler|execution_trace|thread]" or n["id"] in parents)]
print("host nodes:", len(ops), "Chakra nodes:", len(converted))
assert collections.Counter(converted) == collections.Counter(ops), (
    collections.Counter(converted) - collections.Counter(ops), collections.Counter(ops) - collections.Counter(converted))
print("Chakra ET: one node per host op and thread")
