# benchmarks/rank_job.py SOURCE OUT_DIR RANKS MB [--straggler RANK STEP MS]...: the Kineto traces
# of a RANKS-rank job (rank<R>.pt.trace.json, about MB megabytes each), made of a real torch 2.6
# gloo trace SOURCE (tests/data/distributed_gloo_torch26/rank1.*.gz: three steps of a data-parallel
# MLP, four gloo all-reduces each) repeated step after step (ProfilerStep#0, 1, 2, ...), on one
# clock shared by all ranks, so that `optrace summary --by rank` matches and blames as in a job:
#
# - every rank runs the source's steps, and arrives at a step's first all-reduce up to 0.3 ms
#   after the step's first ranks (a jitter per rank and step, below the summary's 1 ms noise
#   floor: no rank is to be blamed for it);
# - `--straggler RANK STEP MS` makes RANK run an aten::mm of MS milliseconds more (the source's
#   own aten::mm event, lengthened) right before STEP's first all-reduce;
# - as in a real job, each step's first all-reduce ends for every rank when the last one has
#   arrived: the others' gloo:all_reduce ranges last that much longer, and every rank's next
#   events move that much later.
#
# distributedInfo is torch 2.6's for a job of RANKS ranks (rank, world_size, and the default
# group's "ranks" list of every rank, as torch writes it). The events are written one per line.
# Steps are written for all ranks one at a time (each file opened to append), so the memory is a
# step's text, whatever RANKS and MB.
import gzip
import json
import os
import sys

JITTER_US = 300  # the most a rank arrives after the step's first, without a straggler
VARIANTS = 8     # ranks fall into this many jitter patterns (rank % VARIANTS)


def usage():
    sys.exit("usage: rank_job.py SOURCE OUT_DIR RANKS MB [--straggler RANK STEP MS]...")


def parse(argv):
    if len(argv) < 4:
        usage()
    source, out_dir, ranks, megabytes = argv[0], argv[1], int(argv[2]), float(argv[3])
    stragglers = {}  # step -> (rank, extra us)
    rest = argv[4:]
    while rest:
        if rest[0] != "--straggler" or len(rest) < 4:
            usage()
        rank, step, ms = int(rest[1]), int(rest[2]), float(rest[3])
        if not 0 <= rank < ranks or step in stragglers:
            sys.exit("--straggler %d %d: a rank of the job, one straggler per step" % (rank, step))
        stragglers[step] = (rank, ms * 1000.0)
        rest = rest[4:]
    return source, out_dir, ranks, megabytes, stragglers


class Template:
    """The source trace cut into its steps: per step, its events relative to its start."""

    def __init__(self, path):
        with gzip.open(path, "rt") as f:
            trace = json.load(f)
        self.head = {k: v for k, v in trace.items() if k != "traceEvents"}
        events = trace["traceEvents"]
        steps = sorted((e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")),
                       key=lambda e: e["ts"])
        starts = [s["ts"] for s in steps]
        self.metadata = [e for e in events if e.get("ph") == "M"]
        self.pid = steps[0]["pid"]
        self.start = starts[0]
        self.steps = []  # (length us: to the next step's start, events)
        for j, s in enumerate(steps):
            end = starts[j + 1] if j + 1 < len(steps) else s["ts"] + s["dur"] + 50.0
            mine = [dict(e, ts=e["ts"] - s["ts"]) for e in events
                    if e.get("ph") in ("X", "s", "f") and e.get("pid") == self.pid and s["ts"] <= e["ts"] < end]
            calls = sorted((e for e in mine if e["name"] == "c10d::allreduce_"), key=lambda e: e["ts"])
            arrivals = sorted((e for e in mine if e["name"] == "gloo:all_reduce"), key=lambda e: e["ts"])
            mm = next(e for e in mine if e["name"] == "aten::mm")
            self.steps.append({"length": end - s["ts"], "events": mine, "call": calls[0]["ts"],
                               "arrival": arrivals[0]["ts"], "first": arrivals[0], "mm": mm})
        self.flow_ids = max([e["id"] for e in events if e.get("ph") in ("s", "f")] + [0]) + 1
        self.bytes_per_step = sum(len(json.dumps(e)) + 2 for st in self.steps for e in st["events"]) / len(self.steps)


def jitter(rank, step):
    """How long after the step's first ranks a rank arrives, in us (deterministic)."""
    return ((rank % VARIANTS) * 7919 + step * 104729) % JITTER_US


def render_step(t, number, start, delay, waited, extra_op):
    """Step `number`'s events (the source's step number % its count) for a rank that arrives `delay`
    us late at its first all-reduce, which lasts `waited` us more for it (the last rank's delay
    less its own); `extra_op`: the straggler's aten::mm of `delay` us, put where it waits."""
    st = t.steps[number % len(t.steps)]
    latest = delay + waited  # what every rank's events after the first arrival move by
    out = []
    for e in st["events"]:
        e = dict(e)
        rel = e["ts"]
        if e.get("ph") in ("s", "f"):
            e["id"] = e["id"] + number * t.flow_ids
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#%d" % number
            e["dur"] = e["dur"] + latest
        elif rel == st["arrival"] and e["name"] == "gloo:all_reduce":
            rel += delay
            e["dur"] = e["dur"] + waited
        elif rel > st["arrival"]:
            rel += latest
        elif rel >= st["call"]:
            rel += delay
        elif "dur" in e and rel + e["dur"] > st["call"]:
            e["dur"] = e["dur"] + latest  # a range around the collectives
        e["ts"] = round(start + rel, 3)
        out.append(json.dumps(e))
    if extra_op:
        mm = dict(st["mm"], ts=round(start + st["call"], 3), dur=round(delay, 3))
        out.append(json.dumps(mm))
    return ",\n".join(out)


def main():
    source, out_dir, ranks, megabytes, stragglers = parse(sys.argv[1:])
    t = Template(source)
    steps = max(len(t.steps), int(megabytes * 1e6 / t.bytes_per_step))
    if any(step >= steps for step in stragglers):
        sys.exit("--straggler: the job has steps 0..%d at %g MB per rank" % (steps - 1, megabytes))
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, "rank%d.pt.trace.json" % r) for r in range(ranks)]
    info = dict(t.head["distributedInfo"], rank=0, world_size=ranks)
    info["pg_config"] = [dict(info["pg_config"][0], pg_size=ranks, ranks=list(range(ranks)))]
    # The head's lines, rendered once: only distributedInfo's rank differs between the ranks.
    head = [(k, json.dumps(v)) for k, v in t.head.items() if k not in ("traceEvents", "traceName", "displayTimeUnit", "baseTimeNanoseconds")]
    for r, path in enumerate(paths):
        info["rank"] = r
        lines = ("  %s: %s" % (json.dumps(k), json.dumps(info) if k == "distributedInfo" else text) for k, text in head)
        with open(path, "w") as f:
            f.write("{\n" + ",\n".join(lines) + ",\n  \"traceEvents\": [\n")
    start = t.start  # step 0 where the source's first step began; each next one after the last
    for number in range(steps):
        late = stragglers.get(number)
        delays = {r: jitter(r, number) for r in range(min(ranks, VARIANTS))}
        latest = max(list(delays.values()) + ([late[1]] if late else []))
        texts = {}  # (delay, straggler) -> the step's text for a rank that arrives that late
        for r, path in enumerate(paths):
            straggler = late is not None and late[0] == r
            delay = late[1] if straggler else delays[r % VARIANTS]
            key = (delay, straggler)
            if key not in texts:
                texts[key] = render_step(t, number, start, delay, latest - delay, straggler)
            with open(path, "a") as f:
                f.write((",\n" if number else "") + texts[key])
        start += t.steps[number % len(t.steps)]["length"] + latest
    tail = [json.dumps(e) for e in t.metadata]
    for r, path in enumerate(paths):
        with open(path, "a") as f:
            f.write(",\n" + ",\n".join(tail) + "\n  ],\n  \"traceName\": %s,\n  \"displayTimeUnit\": \"ms\",\n"
                    "  \"baseTimeNanoseconds\": %d\n}\n" % (json.dumps(path), t.head["baseTimeNanoseconds"]))
    size = os.path.getsize(paths[0])
    print("%s: %d ranks x %d steps, %.2f MB per rank, %.2f GB in all" % (out_dir, ranks, steps, size / 1e6, size * ranks / 1e9))


if __name__ == "__main__":
    main()
