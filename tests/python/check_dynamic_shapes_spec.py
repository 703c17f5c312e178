"""Checks a DynamicShapesSpec JSON file the way torch's loader does.

torch._export.serde.dynamic_shapes._load_dynamic_shapes(spec, from_dict=True) (torch >= 2.3)
accepts exactly: top-level keys {dims, dynamic_shapes}; each dim a symbol with integer min and
max and a list of derived expressions, linear in that symbol alone; leaves that are ints, None,
_DimHint.{AUTO,DYNAMIC,STATIC}, a symbol of dims or one of its derived expressions. The
installed torch may predate that loader, so this re-checks the same rules with sympy and
prints the leaves it resolved, one per line, for the C++ test to compare.

usage: check_dynamic_shapes_spec.py SPEC.json
"""
import json
import sys

import sympy


def main(path):
    with open(path) as f:
        spec = json.load(f)
    assert sorted(spec.keys()) == ["dims", "dynamic_shapes"], spec.keys()
    known = {}
    for name, info in spec["dims"].items():
        symbol = sympy.sympify(name)
        assert isinstance(symbol, sympy.Symbol), name
        assert sorted(info.keys()) == ["derived", "max", "min"], info.keys()
        assert isinstance(info["min"], int) and isinstance(info["max"], int), info
        assert info["min"] <= info["max"], info
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
            if node in ("_DimHint.AUTO", "_DimHint.DYNAMIC", "_DimHint.STATIC"):
                out.append(node)
            else:
                assert node in known, "unknown symbol %r" % node
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
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
