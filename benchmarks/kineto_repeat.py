"""A large Kineto trace made of a real one: its events repeated, each copy shifted in time past
the previous one (so that no copy nests in another), until the file reaches SIZE_MB. Written with
one event per line, as torch.profiler writes.

Usage: /usr/bin/python3 benchmarks/kineto_repeat.py SOURCE[.gz] OUT SIZE_MB
"""
import gzip
import json
import sys


def main(source, out, size_mb):
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = end - start + 1000.0
    one = len(json.dumps(events))
    copies = max(1, int(size_mb * 1e6 / one) + 1)
    repeated = []
    for k in range(copies):
        for e in events:
            if isinstance(e.get("ts"), (int, float)):
                e = dict(e)
                e["ts"] = round(e["ts"] + k * span, 3)
            repeated.append(e)
    # Laid out as the profiler writes: one event per line, ",\n  " between events (the space the
    # importer reads a trace in pieces by); the other keys in their place.
    events_text = "[\n  " + ",\n  ".join(json.dumps(e) for e in repeated) + "\n  ]"
    if isinstance(trace, dict):
        text = "{\n" + ",\n".join(
            "  " + json.dumps(k) + ": " + (events_text if k == "traceEvents" else json.dumps(v))
            for k, v in trace.items()) + "\n}\n"
    else:
        text = events_text + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(f"{out}: {copies} copies of {len(events)} events")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
