"""`optrace summary --by rank` from 8 to 16,384 ranks, with the matching and the blame on: the
time and memory a job's size costs, and whether the answer is still right at that size.

Per size N, rank_job.py makes the job's traces (~1.2 MB per rank, made of the real torch 2.6 gloo
trace tests/data/distributed_gloo_torch26/rank1.*.gz) with three injected stragglers: rank
37N/64 runs an aten::mm of 40 ms more before the first all-reduce of steps 2 and 4, and rank N-1
one of 15 ms before step 13's. Then, each its own process under GNU time (wall, peak RSS):

  text  optrace summary --by rank DIR --jobs J             what a person types; the files read
                                                          cold where the page cache can be
                                                          dropped (root: /proc/sys/vm/drop_caches)
  json  ... --json                                        checked: exactly the two stragglers
                                                          blamed, 37N/64 the most, aten::mm why
  html  ... --html PAGE --force                           and the page's size

Each size's folder is deleted before the next (--keep keeps the last). Prints a Markdown table
(docs/performance.md, "summary --by rank at scale"); --json FILE writes the rows; --plot PNG
draws them (needs matplotlib: python3-matplotlib). Exits 1 when an answer is wrong, never on a
time.

Usage:
  /usr/bin/python3 benchmarks/rank_scale.py OPTRACE [--ranks 8,64,512,1024,4096,16384] [--mb 1.2]
      [--jobs 2] [--out-dir DIR] [--json FILE] [--plot PNG] [--keep]
OPTRACE is the built tool (build/examples/optrace).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = glob.glob(os.path.join(HERE, "..", "tests", "data", "distributed_gloo_torch26", "rank1.*.pt.trace.json.gz"))[0]


def stragglers(n):
    """(rank, step, ms) injected into a job of n ranks."""
    return [(37 * n // 64, 2, 40.0), (37 * n // 64, 4, 40.0), (n - 1, 13, 15.0)]


def drop_caches():
    """Whether the page cache could be dropped (so that the next run reads from the disk)."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def timed(cmd, stdout):
    """Runs cmd under GNU time: (seconds, peak RSS in MB, its stdout when asked for)."""
    fmt = "%e %M"
    # GNU time writes its line last on stderr; the tool's own notes come before it.
    p = subprocess.run(["/usr/bin/time", "-f", "TIME " + fmt] + cmd, stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 0 or not lines or not lines[-1].startswith("TIME "):
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    seconds, kb = lines[-1].split()[1:]
    return float(seconds), int(kb) / 1024.0, p.stdout


def check(n, summary):
    """What is wrong in the --json summary of a job of n ranks ("" when nothing)."""
    blamed = {r["rank"]: r for r in summary["waits"]["ranks"] if r["blamed"] > 0}
    want = {rank for rank, _, _ in stragglers(n)}
    if set(blamed) != want:
        return "blamed %s, injected %s" % (sorted(blamed), sorted(want))
    most = max(blamed.values(), key=lambda r: r["caused_us"])["rank"]
    if most != 37 * n // 64:
        return "the rank the others waited for most is %d, not %d" % (most, 37 * n // 64)
    steps = {rank: sorted(blamed[rank]["steps"]) for rank in blamed}
    for rank, step, _ in stragglers(n):
        if step not in steps[rank]:
            return "rank %d not blamed at step %d (its steps %s)" % (rank, step, steps[rank])
    why = [c for c in summary["waits"]["causes"] if c["rank"] == 37 * n // 64]
    if not why or not why[0]["rows"] or why[0]["rows"][0]["name"] != "aten::mm":
        return "rank %d's wait not explained by aten::mm: %s" % (37 * n // 64, json.dumps(why)[:300])
    return ""


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    ns = [r["ranks"] for r in rows]
    for mode, marker in (("text", "o"), ("json", "s"), ("html", "^")):
        left.plot(ns, [r[mode]["seconds"] for r in rows], marker=marker, label="summary --by rank" + ("" if mode == "text" else " --" + mode))
        right.plot(ns, [r[mode]["peak_mb"] for r in rows], marker=marker, label="summary --by rank" + ("" if mode == "text" else " --" + mode))
    left.plot([ns[0], ns[-1]], [rows[0]["text"]["seconds"], rows[0]["text"]["seconds"] * ns[-1] / ns[0]], color="grey", linestyle=":",
              linewidth=0.8, label="linear growth")
    left.plot([1024, 16384], [10, 90], "rx", label="the goals (10 s, 90 s)")
    right.plot([1024, 16384], [512, 1024], "rx", label="the goals (512 MB, 1 GB)")
    for ax, label in ((left, "wall time (s)"), (right, "peak RSS (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks (~1.2 MB of trace each)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("optrace summary --by rank, matching and blame on, 2 cores")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print("wrote " + out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("optrace")
    ap.add_argument("--ranks", default="8,64,512,1024,4096,16384")
    ap.add_argument("--mb", type=float, default=1.2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "optrace-rank-scale"))
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    rows, wrong = [], []
    for n in [int(x) for x in args.ranks.split(",")]:
        job = os.path.join(args.out_dir, "job")
        shutil.rmtree(job, ignore_errors=True)
        made = time.time()
        inject = [a for rank, step, ms in stragglers(n) for a in ("--straggler", str(rank), str(step), str(ms))]
        subprocess.run([sys.executable, os.path.join(HERE, "rank_job.py"), SOURCE, job, str(n), str(args.mb)] + inject, check=True,
                       stdout=subprocess.DEVNULL)
        size = sum(os.path.getsize(os.path.join(job, f)) for f in os.listdir(job))
        made = time.time() - made
        cold = drop_caches()
        base = [args.optrace, "summary", "--by", "rank", job, "--jobs", str(args.jobs)]
        row = {"ranks": n, "bytes": size, "cold": cold, "made_s": round(made, 1)}
        row["text"] = dict(zip(("seconds", "peak_mb"), timed(base, False)[:2]))
        seconds, mb, out = timed(base + ["--json"], True)
        row["json"] = {"seconds": seconds, "peak_mb": mb, "bytes": len(out)}
        problem = check(n, json.loads(out))
        page = os.path.join(args.out_dir, "report.html")
        seconds, mb, _ = timed(base + ["--html", page, "--force"], False)
        row["html"] = {"seconds": seconds, "peak_mb": mb, "bytes": os.path.getsize(page)}
        row["wrong"] = problem
        if problem:
            wrong.append("%d ranks: %s" % (n, problem))
        rows.append(row)
        print("%6d ranks, %6.2f GB (made in %.0f s), %s: %.2f s %.0f MB; --json %.2f s %.0f MB; --html %.2f s %.0f MB, page %.1f MB%s" % (
            n, size / 1e9, made, "cold" if cold else "warm", row["text"]["seconds"], row["text"]["peak_mb"], row["json"]["seconds"],
            row["json"]["peak_mb"], row["html"]["seconds"], row["html"]["peak_mb"], row["html"]["bytes"] / 1e6,
            "; WRONG: " + problem if problem else "; stragglers named"), flush=True)
        if not args.keep:
            shutil.rmtree(job, ignore_errors=True)
    print("\n| ranks | traces | wall time | peak RSS | `--json` | `--html` | page |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %.2f GB | %.2f s | %.0f MB | %.2f s, %.0f MB | %.2f s, %.0f MB | %.1f MB |" % (
            format(r["ranks"], ","), r["bytes"] / 1e9, r["text"]["seconds"], r["text"]["peak_mb"], r["json"]["seconds"],
            r["json"]["peak_mb"], r["html"]["seconds"], r["html"]["peak_mb"], r["html"]["bytes"] / 1e6))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    if wrong:
        sys.exit("wrong answers:\n  " + "\n  ".join(wrong))


if __name__ == "__main__":
    main()
