"""How fast PyTorch's own Python reads an operator-inputs log: the baseline of optrace's read benchmark.

Usage: /usr/bin/python3 benchmarks/oplog_read_python.py LOG [--repeat N]

Reads LOG as OperatorInputsLoader does in pytorch's benchmarks/dynamo/microbenchmarks/operator_inp_utils.py
(v2.6.0): lines split into "Operator: " and "cnt: " ones, each count eval'd, aten.sum.SymInt renamed
aten.sum.dim_IntList, counts summed in a Counter per operator; and evaluates every input line as it is
read with PyTorch's own deserialize_args (tests/python/pytorch/operator_inp_utils.py, verbatim). Its T
and ST are bound to functions returning their arguments as a tuple instead of allocating tensors, so
what is timed is the parsing alone, what optrace's C++ reader does. (The loader itself evaluates
lines later, in get_inputs_for_operator, and keeps only the last block of a repeated operator; this
evaluates every line as it is read, so that the work grows with the file.)
Prints one line, `<seconds> <lines>`: the best of N runs (default 3) by time.perf_counter, and how
many input lines each run evaluated (the C++ benchmark popens this script and reads both numbers).
Exits 77 where torch cannot be imported.
"""
import argparse
import math
import os
import sys
import time
from collections import Counter, defaultdict

try:
    import torch  # noqa: F401  (operator_inp_utils needs it; exit 77 where it is missing)
except ImportError as e:
    print(f"SKIPPED: {e}", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from operator_inputs_logger import operator_inp_utils  # noqa: E402  PyTorch's own file, verbatim


def tensor(size, dtype, stride=None):
    """deserialize_tensor's signature, without the tensor."""
    return size, dtype, stride


def sparse_tensor(size, dtype, layout, is_coalesced, nnz=None):
    """deserialize_sparse_tensor's signature (it raises NotImplementedError in PyTorch)."""
    return size, dtype, layout, is_coalesced, nnz


# PyTorch's deserialize_args looks T and ST up in its module when called: bind the cheap ones.
operator_inp_utils.deserialize_tensor = tensor
operator_inp_utils.deserialize_sparse_tensor = sparse_tensor
deserialize_args = operator_inp_utils.deserialize_args


def read(path):
    """OperatorInputsLoader.__init__, each input line also deserialized; returns the number of input lines."""
    operator_db = defaultdict(Counter)
    with open(path) as f:
        lines = f.readlines()
    evaluated = 0
    i = 0
    while i < len(lines):
        op_line = lines[i].strip("\n")
        assert "Operator: " in op_line, op_line
        operator = op_line[len("Operator: "):]
        operator = operator if operator != "aten.sum.SymInt" else "aten.sum.dim_IntList"
        op_inps = Counter()
        i += 1
        while i < len(lines) and "Operator: " not in lines[i]:
            line = lines[i]
            cnt = eval(line[len("cnt: "):line.find(",")])
            inps = line[line.find(",") + 2:].strip("'")
            op_inps[inps] += cnt
            deserialize_args(inps)
            evaluated += 1
            i += 1
        operator_db[operator] = op_inps  # as the loader does: a repeated operator's last block wins
    return evaluated


def main():
    parser = argparse.ArgumentParser(description="Python's read time for an operator-inputs log.")
    parser.add_argument("log")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is printed (default 3)")
    args = parser.parse_args()
    best, lines = math.inf, 0
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        lines = read(args.log)
        best = min(best, time.perf_counter() - start)
    print(f"{best:.6f} {lines}")


if __name__ == "__main__":
    main()
