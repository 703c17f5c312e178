"""A large Kineto trace made of a real one: its events repeated, each copy shifted in time past
the previous one (so that no copy nests in another), until the file reaches SIZE_MB (for less than
one copy, the first events). Written with one event per line, as torch.profiler writes.

Usage: /usr/bin/python3 benchmarks/kineto_repeat.py SOURCE[.gz] OUT SIZE_MB
"""
import gzip
import json
import sys


def write_repeated(source, out, size_mb):
    """Writes OUT, about SIZE_MB MB of SOURCE's events repeated; returns (copies, events per copy).
    Streamed: one copy at a time is held, so that a 2 GB trace needs no more memory than the source."""
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
    if size_mb * 1e6 < one:  # less than one copy: its first events, about SIZE_MB of them
        events = events[:max(1, int(len(events) * size_mb * 1e6 / one))]

    # Laid out as the profiler writes: one event per line, ",\n  " between events (the space the
    # importer reads a trace in pieces by); the other keys in their place.
    def write_events(f):
        f.write("[\n  ")
        first = True
        for k in range(copies):
            lines = []
            for e in events:
                if isinstance(e.get("ts"), (int, float)):
                    e = dict(e)
                    e["ts"] = round(e["ts"] + k * span, 3)
                lines.append(json.dumps(e))
            f.write(("" if first else ",\n  ") + ",\n  ".join(lines))
            first = False
        f.write("\n  ]")

    with open(out, "w") as f:
        if isinstance(trace, dict):
            f.write("{\n")
            for i, (k, v) in enumerate(trace.items()):
                f.write(("" if i == 0 else ",\n") + "  " + json.dumps(k) + ": ")
                if k == "traceEvents":
                    write_events(f)
                else:
                    f.write(json.dumps(v))
            f.write("\n}\n")
        else:
            write_events(f)
            f.write("\n")
    return copies, len(events)


def main(source, out, size_mb):
    copies, n = write_repeated(source, out, size_mb)
    print(f"{out}: {copies} copies of {n} events")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
