"""Loads a DynamicShapesSpec JSON file as torch does, and prints what each leaf became.

With a torch that has it (>= 2.6 here), the real loader does the work:
torch._export.serde.dynamic_shapes._load_dynamic_shapes(spec, from_dict=True). Only where the
installed torch predates it (Debian bookworm's 1.13) do torch 2.6's rules apply, re-checked with
sympy: top-level keys {dims, dynamic_shapes}; each dim a symbol with integer min < max (Dim's
own assertion) and a list of derived expressions, linear in that symbol alone; leaves that are
ints, None, _DimHint.AUTO or _DimHint.STATIC (not _DimHint.DYNAMIC: 2.6's loader refuses it), a
symbol of dims or one of its derived expressions.

Prints one line per leaf (`s0*2+1` for a dim 2*s0 + 1, `5`, `None`, `_DimHint.AUTO`) for the
C++ test to compare; exits 1 with the loader's message when the spec is refused. stderr says
which loader ran.

usage: check_dynamic_shapes_spec.py SPEC.json [SPEC.json ...]
With several files (one Python start and torch import for all), each file's lines are followed
by a line `== end`, and the exit status is 0.
"""
import json
import sys

import sympy


def real_loader():
    try:
        from torch._export.serde.dynamic_shapes import _load_dynamic_shapes
    except ImportError:
        return None
    return _load_dynamic_shapes


def describe_loaded(node, out):
    """The real loader's output: ints, None, _DimHint members, Dims and derived Dims."""
    if node is None or isinstance(node, int):
        out.append(repr(node))
    elif isinstance(node, (list, tuple)):
        for x in node:
            describe_loaded(x, out)
    elif isinstance(node, dict):
        for x in node.values():
            describe_loaded(x, out)
    elif type(node).__name__ == "_DimHint":
        out.append("_DimHint." + (node.name if hasattr(node, "name") else node.type.name))
    elif hasattr(node, "root"):  # a derived Dim: fn(x) = a*x + b
        b, a = node.fn(0), node.fn(1) - node.fn(0)
        out.append("%s*%d+%d" % (node.root.__name__, a, b))
    else:
        out.append("%s*1+0" % node.__name__)
    return out


def rules_2_6(spec):
    assert sorted(spec.keys()) == ["dims", "dynamic_shapes"], spec.keys()
    known = {}
    for name, info in spec["dims"].items():
        symbol = sympy.sympify(name)
        assert isinstance(symbol, sympy.Symbol), name
        assert sorted(info.keys()) == ["derived", "max", "min"], info.keys()
        assert isinstance(info["min"], int) and isinstance(info["max"], int), info
        assert info["max"] > info["min"], "Cannot create Dim with inconsistent min=%s, max=%s" % (info["min"], info["max"])
        known[name] = (name, 1, 0)
        for text in info["derived"]:
            expr = sympy.sympify(text)
            assert expr.free_symbols == {symbol}, text
            coeff, rest = sympy.div(expr, symbol)
            assert coeff.is_Integer and rest.is_Integer and int(coeff) >= 1, text
            known[text] = (name, int(coeff), int(rest))
    out = []

    def walk(node):
        if node is None or isinstance(node, int):
            out.append(repr(node))
        elif isinstance(node, str):
            if node in ("_DimHint.AUTO", "_DimHint.STATIC"):
                out.append(node)
            else:
                assert node in known, "Expected dims in spec['dynamic_shapes'] to be tracked in spec['dims'], got %s" % node
                root, a, b = known[node]
                out.append("%s*%d+%d" % (root, a, b))
        elif isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            for x in node.values():
                walk(x)
        else:
            raise AssertionError("bad leaf %r" % (node,))

    walk(spec["dynamic_shapes"])
    return out


def check(path):
    with open(path) as f:
        spec = json.load(f)
    load = real_loader()
    try:
        if load is not None:
            import torch

            sys.stderr.write("loader: torch %s _load_dynamic_shapes\n" % torch.__version__)
            out = describe_loaded(load(spec, from_dict=True), [])
        else:
            sys.stderr.write("loader: torch 2.6's rules (this torch has no _load_dynamic_shapes)\n")
            out = rules_2_6(spec)
    except Exception as e:  # the loader's UserError, or a rule's AssertionError
        print("refused: %s: %s" % (type(e).__name__, e))
        return 1
    print("\n".join(out))
    return 0


def main(paths):
    if len(paths) == 1:
        return check(paths[0])
    for path in paths:
        check(path)
        print("== end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
