"""Runs examples/python/export_from_observations.py on the demo's observation file, as docs/observer.md
says to: with torch >= 2.6 it must export and run every observed signature it can take; with an
older torch (bookworm's 1.13) it must say which version it needs, without a traceback.

usage: check_example.py OBSERVATIONS.json
"""
import os
import subprocess
import sys

try:
    import torch
except ImportError:  # no python3-torch: nothing to check against
    print("SKIPPED: python3-torch is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "python", "export_from_observations.py")


def main(path):
    run = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version >= (2, 6):
        sys.stdout.write(run.stdout[-2000:])
        if run.returncode != 0 or "ran every observed call signature" not in run.stdout:
            print("FAIL (%d): %s" % (run.returncode, run.stderr[-3000:]))
            return 1
    else:
        if run.returncode == 0 or "needs torch >= 2.6" not in run.stderr or "Traceback" in run.stderr:
            print("FAIL: torch %s: expected a one-line refusal naming the version, got (%d): %s"
                  % (torch.__version__, run.returncode, run.stderr[-3000:]))
            return 1
        print("torch %s: %s" % (torch.__version__, run.stderr.strip()))
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
