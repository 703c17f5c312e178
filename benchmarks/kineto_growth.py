"""How the cost of reading a Kineto trace grows with its size: time and peak memory of whole
processes, optrace's and Python's, on traces of 0.1 MB to 2 GB made of a real trace's events.

For each size, a trace is written by repeating the events of SOURCE shifted in time
(kineto_repeat.py, streamed, in a child process), then each of these runs as its own process, side by side:

  optrace summary TRACE                    (stdout thrown away)
  optrace convert TRACE -o OUT.json        (an hf op trace; --force --quiet)
  python3 -c 'json.load(open(TRACE))'      (Python's json, nothing else)

and its wall time and peak resident memory (the kernel's ru_maxrss, as GNU time reports it) are
recorded: the best time of RUNS runs (RUNS_LARGE from 500 MB up), the largest peak of them. Prints a table and writes the
figures to OUT_DIR/kineto_growth.json (kineto_growth_plot.py draws them).

Usage:
  /usr/bin/python3 benchmarks/kineto_growth.py OPTRACE [--source TRACE] [--sizes 0.1,1,10,100,1000,2000]
                                               [--runs 3] [--runs-large 1] [--out-dir DIR] [--keep]
OPTRACE is the built tool (build/examples/optrace). Traces are written to OUT_DIR (default
/tmp/optrace-growth) and removed after their size is measured unless --keep. The largest need
about 2.5x their size free in memory for Python's json.load (about 12 GB at 2 GB).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.join(HERE, "..", "tests", "data", "kineto", "mtia_inference.pt.trace.json.gz")


# GNU time reports its child's peak RSS from a process that forked from a tiny one; os.wait4's
# ru_maxrss of our own child starts from this Python's RSS at fork (~14 MB), hiding smaller peaks.
GNU_TIME = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None


def run(cmd):
    """(wall seconds, peak RSS in MB) of one run of `cmd` as a child process."""
    full = [GNU_TIME, "-f", "optrace-growth-rss-kb %M", *cmd] if GNU_TIME else cmd
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(full, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {os.waitstatus_to_exitcode(status)}: {err.strip()}")
    rss_kb = usage.ru_maxrss  # KiB on Linux
    for line in err.splitlines():
        if line.startswith("optrace-growth-rss-kb "):
            rss_kb = int(line.split()[1])
    return wall, rss_kb / 1024.0


def measure(cmd, runs):
    results = [run(cmd) for _ in range(runs)]
    return {"seconds": min(r[0] for r in results), "seconds_max": max(r[0] for r in results),
            "peak_rss_mb": max(r[1] for r in results)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("optrace")
    ap.add_argument("--source", default=DEFAULT_SOURCE)
    ap.add_argument("--sizes", default="0.1,1,10,100,1000,2000", help="target sizes in MB (1 MB = 10^6 bytes)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--runs-large", type=int, default=1, help="runs of traces of 500 MB or more")
    ap.add_argument("--out-dir", default="/tmp/optrace-growth")
    ap.add_argument("--keep", action="store_true", help="keep the traces")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    python = sys.executable
    commands = {
        "optrace summary": lambda t, o: [args.optrace, "summary", t],
        "optrace convert": lambda t, o: [args.optrace, "convert", t, "-o", o, "--force", "--quiet"],
        "python json.load": lambda t, o: [python, "-c", "import json, sys; json.load(open(sys.argv[1]))", t],
    }
    rows = []
    print(f"{'MB':>8} {'events':>10}  " + "  ".join(f"{name + ' s':>18} {'MB RSS':>8}" for name in commands))
    for size in [float(s) for s in args.sizes.split(",")]:
        trace = os.path.join(args.out_dir, f"repeated_{size:g}MB.pt.trace.json")
        out = os.path.join(args.out_dir, "converted.hf_op_trace.json")
        # Written by a child process: this one stays small, and a child's peak RSS (ru_maxrss)
        # starts from its parent's at fork.
        made = subprocess.run([python, os.path.join(HERE, "kineto_repeat.py"), args.source, trace, str(size)],
                              check=True, capture_output=True, text=True).stdout
        copies, per_copy = (int(w) for w in made.split()[1:5:3])  # "OUT: C copies of N events"
        row = {"target_mb": size, "bytes": os.path.getsize(trace), "events": copies * per_copy, "commands": {}}
        for name, cmd in commands.items():
            row["commands"][name] = measure(cmd(trace, out), args.runs if size < 500 else args.runs_large)
        rows.append(row)
        print(f"{row['bytes'] / 1e6:8.1f} {row['events']:10d}  " + "  ".join(
            f"{row['commands'][n]['seconds']:18.3f} {row['commands'][n]['peak_rss_mb']:8.0f}" for n in commands), flush=True)
        if not args.keep:
            os.remove(trace)
        if os.path.exists(out):
            os.remove(out)
    info = {"machine": platform.processor() or platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "source": os.path.basename(args.source), "runs": args.runs, "runs_large": args.runs_large, "date": time.strftime("%Y-%m-%d"), "rows": rows}
    path = os.path.join(args.out_dir, "kineto_growth.json")
    with open(path, "w") as f:
        json.dump(info, f, indent=1)
    print(f"figures: {path}")


if __name__ == "__main__":
    main()
