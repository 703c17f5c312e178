"""Makes a large execution trace from a real one: its nodes repeated, ids renumbered.

Usage: python3 make_execution_trace.py IN.et.json[.gz] OUT.et.json COPIES
Each copy of IN's nodes (torch 2.6's mobilenet_v3_small window in tests/data/execution_trace, by
default) gets ids of its own, its parents mapped with them, and its thread roots under the first
copy's: one window COPIES times as long, as torch writes it (one node per line).
"""
import gzip
import json
import sys


def main():
    src, out, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        trace = json.load(f)
    nodes = trace["nodes"]
    span = max(n["id"] for n in nodes) + 1
    with open(out, "w") as f:
        head = {k: v for k, v in trace.items() if k != "nodes"}
        f.write(json.dumps(head)[:-1] + ', "nodes": [\n')
        first = True
        for c in range(copies):
            for n in nodes:
                m = dict(n)
                m["id"] = n["id"] + c * span
                if n["ctrl_deps"] > 1:
                    m["ctrl_deps"] = n["ctrl_deps"] + c * span
                f.write(("" if first else ",\n") + json.dumps(m))
                first = False
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
