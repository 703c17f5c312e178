"""optrace's operator-inputs text logs against PyTorch's, then the CLI reading PyTorch's back.

Usage: oplog_parity.py MODEL TRACE_SCRIPTED OPTRACE_CLI WORK_DIR

For MODEL (as tracer_parity.py names them): builds and scripts it and saves it with its calls as
tracer_parity.py does, then
- runs the calls under torch.no_grad() and PyTorch's own OperatorInputsMode (the writer of the
  logs under pytorch's operator_inp_logs/, carried in tests/python/pytorch/) and writes
  WORK_DIR/reference.txt with log_to_file;
- runs TRACE_SCRIPTED (tests/models/trace_scripted.cpp) with an output ending in .txt, which
  traces with OpTracer and writes the same format, and asserts both files are byte-identical;
- has PyTorch's own OperatorInputsLoader read optrace's log and build every input (float32, on
  the CPU), and runs each op on them: PyTorch's reader takes what optrace writes;
- asserts `optrace convert reference.txt -o roundtrip.txt` writes reference.txt back byte for
  byte, and that `optrace replay reference.txt --check` on the CPU reports no input errored or
  mismatched: the CLI reads the logs PyTorch writes.
Exits 0 on success, 1 on a difference (printed), 77 (skipped) where torch or torchvision is
missing.
"""
import difflib
import os
import subprocess
import sys

try:
    import torch
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
sys.path.insert(0, here)
from operator_inputs_logger import OperatorInputsLoader, OperatorInputsMode  # noqa: E402
from tracer_parity import fail, replay_check, scripted_model  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def diff(a_path, b_path, limit=60):
    """The first `limit` lines of a unified diff of two text files."""
    a, b = (read_bytes(p).decode(errors="replace").splitlines(keepends=True) for p in (a_path, b_path))
    lines = list(difflib.unified_diff(a, b, a_path, b_path))
    more = f"... ({len(lines) - limit} more diff lines)\n" if len(lines) > limit else ""
    return "".join(lines[:limit]) + more


def main(name, trace_scripted, cli, work):
    scripted, calls, model_path, calls_path = scripted_model(name, work)
    ref_path, ours_path = os.path.join(work, "reference.txt"), os.path.join(work, "optrace.txt")
    logger = OperatorInputsMode()
    with torch.no_grad(), logger:
        for call in calls:
            scripted(*call)
    logger.log_to_file(ref_path)
    ref = read_bytes(ref_path)

    roundtrip_path, report_path = os.path.join(work, "roundtrip.txt"), os.path.join(work, "replay.json")
    for path in (ours_path, roundtrip_path, report_path):  # none left by an earlier run
        if os.path.exists(path):
            os.remove(path)
    run = subprocess.run([trace_scripted, model_path, calls_path, ours_path], capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        fail(f"trace_scripted exited {run.returncode}")
    if not os.path.exists(ours_path):
        fail(f"trace_scripted wrote no {ours_path}")
    if read_bytes(ours_path) != ref:
        fail(f"{name}: optrace's log and PyTorch's OperatorInputsMode's differ:\n" + diff(ref_path, ours_path))
    ops, lines = ref.count(b"Operator: "), ref.count(b"\n")
    print(f"{name}: {ops} ops, {lines} lines: equal to PyTorch's OperatorInputsMode")

    loader = OperatorInputsLoader(ours_path)
    built = 0
    for op in loader.get_all_ops():
        for inputs in loader.get_inputs_for_operator(op, dtype=torch.float32, device="cpu"):
            if inputs is None:  # the loader builds no embedding inputs (its own limit)
                continue
            args, kwargs = inputs
            op(*args, **kwargs)
            built += 1
    print(f"{name}: PyTorch's OperatorInputsLoader read optrace's log: {built} inputs built and run")

    run = subprocess.run([cli, "convert", ref_path, "-o", roundtrip_path, "--quiet", "--force"], capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        fail(f"{name}: optrace convert exited {run.returncode}")
    if not os.path.exists(roundtrip_path) or read_bytes(roundtrip_path) != ref:
        fail(f"{name}: optrace convert does not write the Python log back:\n" + diff(ref_path, roundtrip_path))
    print(f"{name}: optrace convert writes the Python log back byte for byte")

    replay_check(name, cli, ref_path, report_path, "replay --check of the Python log on cpu")

if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
