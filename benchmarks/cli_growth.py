"""How the optrace CLI's cost grows where users grow: each case at its size and at a tenth of it,
so that linear (about 10x) and quadratic (about 100x) growth show.

Cases (inputs made here, in OUT_DIR):
  plan        optrace plan OBS -o DIR          an observation file of N signatures of one structure
  rank-folder optrace summary --by rank DIR    a folder of N small rank traces (one step each)
  steps       optrace summary --by rank TRACE  N ProfilerStep ranges, each overlapping the next
                                               20,000 us, against N collectives
  arguments   optrace summary OBS              an observation file of one call of N tensor arguments
  drift       optrace drift PLAN OBS           the plan case's file against its own plan (made first,
                                               not timed): N signatures judged by each package's check
  drift-arguments  optrace drift PLAN OBS      the arguments case's file against its own plan
  dims        optrace plan OBS -o DIR          N tensor arguments, each with a dynamic dim of its own
                                               sizes (random, fixed seed) over 8 signatures: N dims
                                               compared for shared and derived dims

Each run is its own process: the best wall time of RUNS runs and the peak resident memory (GNU
time's maximum RSS). A run past TIMEOUT seconds is reported as "> TIMEOUT s". Prints a Markdown
table (docs/performance.md, "How the CLI's cost grows").

--sweep runs five sizes per case (its size / 100, / 30, / 10, / 3 and itself) for the growth
plot; --json FILE writes every row (case, size, seconds, peak RSS) for cli_growth_plot.py.

Usage:
  /usr/bin/python3 benchmarks/cli_growth.py OPTRACE [--cases plan,rank-folder,steps] [--runs 3]
                                            [--timeout 120] [--out-dir DIR] [--sweep] [--json FILE]
OPTRACE is the built tool (build/examples/optrace).
"""
import argparse
import copy
import json
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MASKED = os.path.join(HERE, "..", "tests", "data", "observations", "masked.json")
SIZES = {"plan": (10_000, 100_000), "rank-folder": (1_000, 10_000), "steps": (15_000, 150_000), "arguments": (3_000, 30_000),
         "drift": (10_000, 100_000), "drift-arguments": (3_000, 30_000), "dims": (3_000, 30_000)}


def observations(path, n):
    """masked.json with N distinct signatures of its first call's structure (sizes vary)."""
    with open(MASKED) as f:
        d = json.load(f)
    first = d["history"][0]
    history = []
    for i in range(n):
        h = copy.deepcopy(first)
        t = h["call"]["dict"]["input_ids"]["tensor"]
        a, b = 1 + i % 317, 1 + i // 317
        t["sizes"] = [{"as_int": a}, {"as_int": b}]
        t["strides"] = [{"as_int": b}, {"as_int": 1}]
        history.append(h)
    d["history"] = history
    d["calls"] = {"total": n, "distinct": n, "stored": len(d["stored"]), "dropped_signatures": 0}
    with open(path, "w") as f:
        json.dump(d, f)


def arguments(path, n):
    """masked.json with one call (stored) of N tensor arguments x0, x1, ..."""
    with open(MASKED) as f:
        d = json.load(f)
    tensor = d["history"][0]["call"]["dict"]["input_ids"]
    call = {"dict": {"x%d" % i: copy.deepcopy(tensor) for i in range(n)}}
    d["arg_names"] = ["x%d" % i for i in range(n)]
    d["history"] = [{"count": 1, "call": call}]
    d["stored"] = [call]
    d["calls"] = {"total": 1, "distinct": 1, "stored": 1, "dropped_signatures": 0}
    with open(path, "w") as f:
        json.dump(d, f)


def dims(path, n, signatures=8):
    """masked.json with SIGNATURES calls of N tensor arguments x0, x1, ...: dim 0 of each takes
    its own random sizes (no two arguments share or derive), dim 1 is 3."""
    import random
    with open(MASKED) as f:
        d = json.load(f)
    tensor = d["history"][0]["call"]["dict"]["input_ids"]
    rng = random.Random(1)
    sizes = [[rng.randint(2, 10**6) for _ in range(signatures)] for _ in range(n)]
    history = []
    for s in range(signatures):
        call = {"dict": {}}
        for i in range(n):
            t = copy.deepcopy(tensor)
            t["tensor"]["sizes"] = [{"as_int": sizes[i][s]}, {"as_int": 3}]
            t["tensor"]["strides"] = [{"as_int": 3}, {"as_int": 1}]
            call["dict"]["x%d" % i] = t
        history.append({"count": 1, "call": call})
    d["arg_names"] = ["x%d" % i for i in range(n)]
    d["history"] = history
    d["stored"] = [history[0]["call"]]
    d["calls"] = {"total": signatures, "distinct": signatures, "stored": 1, "dropped_signatures": 0}
    with open(path, "w") as f:
        json.dump(d, f)


def rank_folder(path, n):
    os.makedirs(path)
    for k in range(n):
        with open(os.path.join(path, "rank%05d.pt.trace.json" % k), "w") as f:
            f.write('{"distributedInfo": {"rank": %d, "world_size": %d}, "traceEvents": [{"ph": "X", '
                    '"cat": "user_annotation", "name": "ProfilerStep#1", "ts": 1, "dur": 10}]}' % (k, n))


def overlapping_steps(path, n, dur=20000):
    """N ProfilerStep ranges 1 us apart, each DUR us long, against N collectives 2 us apart."""
    events = []
    for k in range(n):
        events.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "ts": %d, "dur": %d}' % (k, k, dur))
        events.append('{"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "ts": %d, "dur": 1}' % (2 * k))
    with open(path, "w") as f:
        f.write('{"distributedInfo": {"rank": 0}, "traceEvents": [' + ", ".join(events) + "]}")


def run(cmd, timeout):
    """(wall seconds or None past the timeout, peak RSS in MB) of one run."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", "timeout", str(timeout)] + cmd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, rss = out.stderr.strip().splitlines()[-1].split()
    if out.returncode == 124:
        return None, float(rss) / 1024
    if out.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (out.returncode, " ".join(cmd), out.stderr))
    return float(wall), float(rss) / 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("optrace")
    p.add_argument("--cases", default="plan,rank-folder,steps,arguments")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--out-dir", default="/tmp/optrace-cli-growth")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    rows = []
    shutil.rmtree(a.out_dir, ignore_errors=True)
    os.makedirs(a.out_dir)
    print("| case | size | time | peak RSS |")
    print("| --- | ---: | ---: | ---: |")
    for case in a.cases.split(","):
        big = SIZES[case][1]
        for n in ([big // 100, big // 30, big // 10, big // 3, big] if a.sweep else SIZES[case]):
            base = os.path.join(a.out_dir, "%s_%d" % (case, n))
            if case in ("plan", "dims"):
                (observations if case == "plan" else dims)(base + ".json", n)
                cmd = [a.optrace, "plan", base + ".json", "-o", base + "_plan", "--force"]
            elif case == "arguments":
                arguments(base + ".json", n)
                cmd = [a.optrace, "summary", base + ".json"]
            elif case in ("drift", "drift-arguments"):
                (observations if case == "drift" else arguments)(base + ".json", n)
                subprocess.run([a.optrace, "plan", base + ".json", "-o", base + "_plan"], check=True, stdout=subprocess.DEVNULL)
                cmd = [a.optrace, "drift", base + "_plan", base + ".json"]
            elif case == "rank-folder":
                rank_folder(base, n)
                cmd = [a.optrace, "summary", "--by", "rank", base]
            else:
                overlapping_steps(base + ".pt.trace.json", n)
                cmd = [a.optrace, "summary", "--by", "rank", base + ".pt.trace.json"]
            best, peak = None, 0.0
            for _ in range(a.runs):
                wall, rss = run(cmd, a.timeout)
                peak = max(peak, rss)
                if wall is None:
                    break
                best = wall if best is None else min(best, wall)
            shown = "> %d s" % a.timeout if best is None else "%.2f s" % best
            print("| %s | %s | %s | %.0f MB |" % (case, format(n, ","), shown, peak), flush=True)
            rows.append({"case": case, "size": n, "seconds": best, "peak_rss_mb": peak})
    print("\n%s, %s, Python %s" % (platform.machine(), os.cpu_count(), platform.python_version()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"timeout": a.timeout, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
