"""optrace's Kineto import against the reference Python tracer, on traces torch's profiler wrote.

Usage: kineto_parity.py MODEL OPTRACE_CLI WORK_DIR

For MODEL (as tracer_parity.py names them): runs the eager model's calls once under
torch.profiler.profile(activities=[CPU], record_shapes=True) and exports the Kineto trace, and
once under the reference tracer (tests/python/dispatch_tracer.py), same inputs; then asserts that
`optrace convert TRACE -o OUT.json` (default options) writes what the reference wrote: the same
ops in the same order, the same calls and unique inputs. Exits 77 (skipped) where torch is older
than 2.6 (older profilers write no "Concrete Inputs", so values would be unknown) or torchvision
is missing.
"""
import json
import os
import subprocess
import sys

try:
    import torch
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 6):
    print(f"SKIPPED: torch {torch.__version__} < 2.6")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
sys.path.insert(0, here)
from dispatch_tracer import Tracer  # noqa: E402
from tracer_parity import compare, fail, model_and_calls  # noqa: E402


def main(name, cli, work):
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model, calls = model_and_calls(name)
    model.eval()
    trace_path = os.path.join(work, f"{name}.pt.trace.json")
    ours_path = os.path.join(work, "optrace.json")
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        # with_stack=True crashes Debian's torch 2.6; shapes are all the import needs.
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for call in calls:
                model(*call)
        prof.export_chrome_trace(trace_path)
        tracer = Tracer()
        with tracer:
            for call in calls:
                model(*call)
    ref = tracer.result()
    with open(os.path.join(work, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    run = subprocess.run([cli, "convert", trace_path, "-o", ours_path, "--force"], capture_output=True, text=True)
    print(run.stderr, end="")
    if run.returncode != 0:
        fail(f"optrace convert exited {run.returncode}")
    with open(ours_path) as f:
        ours = json.load(f)
    diffs = compare(ours, ref)
    if diffs:
        fail(f"{name}: the Kineto import and the reference differ ({len(diffs)}):\n" + "\n".join(diffs))
    print(f"{name}: {len(ours)} ops, {sum(e['total_calls'] for e in ours.values())} calls: "
          "the Kineto import equals the reference")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
