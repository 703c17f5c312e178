"""The CLI's work grows linearly where users grow (issue 61, item 4), counted, not timed.

Each case runs the built tool on inputs of N and 10N (benchmarks/cli_growth.py makes them) and of
a base size, under valgrind's cachegrind, which counts the instructions the process executes: the
same count on any machine and any load, where a time would not be. The instructions the case adds
over its base size must grow less than MAX_GROWTH times from N to 10N: linear work grows about 10
times, N log N about 13, quadratic about 100. Before the fixes each case grew past it (docs/
performance.md: "How the CLI's cost grows" has the times and the commands to remeasure).

Cases:
  plan         optrace plan OBS: N signatures of one structure, merged (a hash per signature)
  rank-folder  optrace summary --by rank DIR: N rank traces, distinct-input and output checks
  steps        optrace summary --by rank TRACE: N steps, each overlapping every later one, against
               N collectives (prefix sums and binary searches)
  arguments    optrace summary OBS: one call of N tensor arguments (each found at its hint)
  dims         optrace plan OBS: N dynamic dims of their own sizes (compared by DimKeys)

Usage: python3 tests/cli/growth.py OPTRACE WORK_DIR [--cases plan,...] [--valgrind PATH]
Exit 0 when every case grows less than MAX_GROWTH times, 1 naming those that do not, 77 (skipped)
without valgrind.
"""
import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cli_growth", os.path.join(HERE, "..", "..", "benchmarks", "cli_growth.py"))
cli_growth = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cli_growth)

MAX_GROWTH = 25
# (base, N): 10N is the third size. Small enough that the whole test takes seconds under
# valgrind, large enough that the quadratic term of the code before the fixes dominates at 10N.
SIZES = {"plan": (10, 1_000), "rank-folder": (10, 300), "steps": (10, 1_000), "arguments": (10, 300), "dims": (10, 300)}


def command(optrace, case, n, work):
    """Makes the case's input of size n; returns the command that reads it."""
    base = os.path.join(work, "%s_%d" % (case, n))
    if case in ("plan", "dims"):
        (cli_growth.observations if case == "plan" else cli_growth.dims)(base + ".json", n)
        return [optrace, "plan", base + ".json", "-o", base + "_plan", "--force"]
    if case == "arguments":
        cli_growth.arguments(base + ".json", n)
        return [optrace, "summary", base + ".json"]
    if case == "rank-folder":
        cli_growth.rank_folder(base, n)
        return [optrace, "summary", "--by", "rank", base]
    # Each step spans every later one: walking the intervals a step spans is quadratic here.
    cli_growth.overlapping_steps(base + ".pt.trace.json", n, dur=2 * n)
    return [optrace, "summary", "--by", "rank", base + ".pt.trace.json"]


def instructions(valgrind, cmd):
    out = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"] + cmd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit("growth: failed (exit %d): %s\n%s" % (out.returncode, " ".join(cmd), out.stderr[-2000:]))
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if not m:
        sys.exit("growth: no instruction count from valgrind for %s\n%s" % (" ".join(cmd), out.stderr[-2000:]))
    return int(m.group(1).replace(",", ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("optrace")
    p.add_argument("work")
    p.add_argument("--cases", default=",".join(SIZES))
    p.add_argument("--valgrind", default=shutil.which("valgrind"))
    a = p.parse_args()
    if not a.valgrind:
        print("growth: valgrind is not installed (Debian: valgrind)")
        return 77
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    failed = []
    for case in a.cases.split(","):
        base, n = SIZES[case]
        counts = [instructions(a.valgrind, command(a.optrace, case, size, a.work)) for size in (base, n, 10 * n)]
        growth = (counts[2] - counts[0]) / max(counts[1] - counts[0], 1)
        verdict = "ok" if growth < MAX_GROWTH else "GROWS TOO FAST"
        print("growth: %-11s %7d -> %7d: %6.1fx the instructions over the base (%s; %s)" %
              (case, n, 10 * n, growth, ", ".join(format(c, ",") for c in counts), verdict), flush=True)
        if growth >= MAX_GROWTH:
            failed.append(case)
    if failed:
        print("growth: more than %dx from N to 10N: %s" % (MAX_GROWTH, ", ".join(failed)))
        return 1
    print("growth: every case grows less than %dx" % MAX_GROWTH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
