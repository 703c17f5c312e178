# benchmarks/rank_traces.py SOURCE OUT_DIR RANKS MB: RANKS rank traces of about MB megabytes each,
# made of the real torch 2.6 gloo trace SOURCE (tests/data/distributed_gloo_torch26/rank0.*.gz)
# repeated: each copy's events shifted past the previous copy's end and its ProfilerStep#N
# renumbered (N + 3 * copy), so that a trace has many distinct steps; distributedInfo's rank set
# to 0..RANKS-1. The events are written one per line (`},\n{`), as a merger writes them.
import copy
import gzip
import json
import os
import sys


def main():
    source, out_dir, ranks, megabytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with gzip.open(source, "rt") as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = [int(e["name"].split("#")[1]) for e in events if e["name"].startswith("ProfilerStep#")]
    span = max(e["ts"] + e.get("dur", 0) for e in events) - min(e["ts"] for e in events)
    lines = [json.dumps(e) for e in events]
    copies = max(1, int(megabytes * 1e6 / sum(len(x) + 2 for x in lines)))
    os.makedirs(out_dir, exist_ok=True)
    for rank in range(ranks):
        head = {k: v for k, v in trace.items() if k != "traceEvents"}
        head["distributedInfo"] = dict(trace["distributedInfo"], rank=rank, world_size=ranks)
        path = os.path.join(out_dir, "rank%d.pt.trace.json" % rank)
        with open(path, "w") as out:
            out.write("{\n  \"distributedInfo\": %s,\n  \"traceEvents\": [\n" % json.dumps(head["distributedInfo"]))
            for k in range(copies):
                for i, e in enumerate(events):
                    moved = copy.copy(e)
                    moved["ts"] = round(e["ts"] + k * (span + 100.0) + rank * 7.0, 3)
                    if e["name"].startswith("ProfilerStep#"):
                        moved["name"] = "ProfilerStep#%d" % (int(e["name"].split("#")[1]) + k * (max(steps) + 1))
                    out.write(("" if k == 0 and i == 0 else ",\n") + json.dumps(moved))
            out.write("\n  ]\n}\n")
        print("%s: %.0f MB, %d copies" % (path, os.path.getsize(path) / 1e6, copies))


if __name__ == "__main__":
    main()
