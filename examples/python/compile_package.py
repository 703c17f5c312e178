"""Compile an AOTInductor package from an optrace observation file (torch >= 2.6).

    python3 compile_package.py observations.json model.pt2 [dynamic_shapes.json]

Exports the model with the file's example arguments and dynamic-shapes spec (as
export_from_observations.py does), compiles it with torch._inductor.aoti_compile_and_package, and
stores in the package's metadata (`aot_inductor.metadata`) what optrace::aoti::Package needs to
guard its inputs in C++: every flat input's argument path, dtype, device, static sizes, each
dynamic dim's expression and range as exported, and the value of every non-tensor input (which
the package bakes in). Replace `Model` (export_from_observations.py) with your own module; the
function is the part to reuse:

    doc = read("observations.json")
    path, program = compile_package(model, doc, "model.pt2")

The metadata key is "optrace.guard" (GUARD_KEY); docs/aoti.md describes its content.
"""
import json
import math
import sys

import torch

import export_from_observations as efo

GUARD_KEY = "optrace.guard"
GUARD_VERSION = 1


def compile_package(model, doc, package_path, dynamic_shapes=None, inductor_configs=None):
    """Exports `model` with the observation file's example arguments (`doc`, the parsed file) and
    `dynamic_shapes` (default: the file's own spec; pass a dynamic_shapes.json's content or a
    spec torch.export takes for another style), compiles the program into `package_path` with
    optrace's guard metadata added to `inductor_configs`. Returns (package path, program)."""
    efo.require_torch()
    args, kwargs = efo.example_inputs(doc)
    if dynamic_shapes is None or isinstance(dynamic_shapes, dict) and "dynamic_shapes" in dynamic_shapes:
        dynamic_shapes = efo.dynamic_shapes(dynamic_shapes if dynamic_shapes is not None else doc)
    program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    configs = dict(inductor_configs or {})
    metadata = dict(configs.get("aot_inductor.metadata", {}))
    metadata[GUARD_KEY] = json.dumps(guard_metadata(program, doc.get("arg_names", [])), separators=(",", ":"))
    configs["aot_inductor.metadata"] = metadata
    path = torch._inductor.aoti_compile_and_package(program, package_path=package_path, inductor_configs=configs)
    return path, program


def guard_metadata(program, arg_names=()):
    """What the C++ guard checks, from the exported program: its user inputs in the order the
    package's run() takes them (the in_spec's leaves), each with its path (`x`, `pair[1]`,
    `cfg['k']`), and for a tensor its dtype, device and sizes (an int, or the dim's expression
    with its symbol, `value = coeff * symbol + offset` where torch's expression is linear in one
    symbol, and its range), for another leaf its exported value (the package has it baked in)."""
    from torch.utils._pytree import tree_flatten_with_path
    from torch._export.passes.add_runtime_assertions_for_constraints_pass import _convert_range_to_int

    user_inputs = set(program.graph_signature.user_inputs)
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
    args, kwargs = program.example_inputs
    flat, _ = tree_flatten_with_path((args, kwargs))
    if len(flat) != len(placeholders):
        raise RuntimeError("guard_metadata: %d flat inputs, %d user placeholders" % (len(flat), len(placeholders)))
    ranges = {}
    inputs = []
    for (key_path, _), node in zip(flat, placeholders):
        val = node.meta.get("val")
        entry = {"path": input_path(key_path, arg_names)}
        if isinstance(val, torch.Tensor):
            entry.update(kind="tensor", dtype=str(val.dtype), device=str(val.device),
                         sizes=[size_entry(d, program.range_constraints, ranges, _convert_range_to_int)
                                for d in val.shape])
        elif isinstance(val, (bool, int, float, str)) or val is None:
            entry.update(kind=type(val).__name__, value=val)
        else:
            entry.update(kind="unknown", type=type(val).__name__)
        inputs.append(entry)
    return {"version": GUARD_VERSION, "torch": torch.__version__, "arg_names": list(arg_names), "inputs": inputs,
            "symbols": ranges}


def input_path(key_path, arg_names):
    """`x`, `x[0]`, `cfg['k']`: the argument's name (positional ones by the observed names) and
    the keys below it, from a tree_flatten_with_path key path of (args, kwargs)."""
    from torch.utils._pytree import keystr

    top, rest = key_path[0].idx, key_path[1:]
    if top == 0:  # positional: ((args...), {}) -> SequenceKey(i)
        i = rest[0].idx
        name = arg_names[i] if i < len(arg_names) else "#%d" % i
    else:  # keyword: MappingKey(name)
        name = str(rest[0].key)
    return name + keystr(rest[1:])


def size_entry(dim, range_constraints, ranges, to_int):
    """An int, or {"expr", "symbol", "coeff", "offset", "min", "max"} (max None: unbounded;
    coeff None: an expression optrace does not solve, checked by range only)."""
    if not isinstance(dim, torch.SymInt):
        return int(dim)
    import sympy

    expr = dim.node.expr
    if expr.is_number:
        return int(expr)
    entry = {"expr": str(expr)}
    free = sorted(expr.free_symbols, key=str)
    if len(free) == 1:
        symbol = free[0]
        entry["symbol"] = str(symbol)
        poly = sympy.Poly(expr, symbol)
        coeffs = poly.all_coeffs()
        if poly.degree() == 1 and all(c.is_integer for c in coeffs):
            entry["coeff"], entry["offset"] = int(coeffs[0]), int(coeffs[1])
        if symbol in range_constraints:
            ranges[str(symbol)] = bounds(range_constraints[symbol], to_int)
    if expr in range_constraints:
        entry["min"], entry["max"] = bounds(range_constraints[expr], to_int)
    return entry


def bounds(value_range, to_int):
    lo, hi = to_int(value_range)
    return [int(lo), None if hi == math.inf else int(hi)]


def main(path, package_path, spec_path=None):
    efo.require_torch()
    doc = efo.read(path)
    spec = efo.read(spec_path) if spec_path else None
    out, program = compile_package(efo.Model(), doc, package_path, dynamic_shapes=spec)
    print("compiled %s; guard: %s" % (out, json.dumps(guard_metadata(program, doc.get("arg_names", [])))))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
