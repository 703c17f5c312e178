"""Compile an AOTInductor package from an optrace observation file (torch >= 2.6).

    python3 compile_package.py observations.json model.pt2 [dynamic_shapes.json]
    python3 compile_package.py --plan DIR/plan.json

Exports the model with the file's example arguments and dynamic-shapes spec (as
export_from_observations.py does), compiles it with torch._inductor.aoti_compile_and_package, and
stores in the package's metadata (`aot_inductor.metadata`) what optrace::aoti::Package needs to
guard its inputs in C++: every flat input's argument path, dtype, device, static sizes, each
dynamic dim's expression and range as exported, and the value of every non-tensor input (which
the package bakes in). Replace `Model` (export_from_observations.py) with your own module; the
function is the part to reuse:

    doc = read("observations.json")
    path, program = compile_package(model, doc, "model.pt2")
    paths = compile_plan(model, "plan/plan.json")   # every package of `optrace plan ... -o plan`,
                                                    # sharing one copy of the weights: plan/weights.pt;
                                                    # plan/reference.pt: the module they replace
    save_weights(finetuned, "weights_v2.pt")        # for PackageSet::replace_weights

The metadata keys are "optrace.guard" (GUARD_KEY), for a package compiled without its weights
"optrace.weights" (WEIGHTS_KEY), and for a package of a plan the plan's id, "optrace.plan"
(PLAN_KEY); docs/aoti.md describes their content.
"""
import json
import math
import os
import sys

import torch

import export_from_observations as efo

GUARD_KEY = "optrace.guard"
GUARD_VERSION = 1
WEIGHTS_KEY = "optrace.weights"
# The id of the plan a package was compiled for (plan.json's "id"): PackageSet::load refuses a
# package of another plan.
PLAN_KEY = "optrace.plan"
# The file compile_plan writes a plan's weights to, beside plan.json (PackageSet::load reads it).
WEIGHTS_FILE = "weights.pt"
# The module the packages replace, scripted with the same weights, beside plan.json.
REFERENCE_FILE = "reference.pt"
# What compiles a package without its weights in torch 2.6: the library holds no constants, and
# every tensor constant stays one the runner can be given (none folded into the code).
SHARED_WEIGHTS_CONFIGS = {"aot_inductor.package_constants_in_so": False, "always_keep_tensor_constants": True}


def weights_of(model):
    """The module's tensors by fully qualified name: every parameter and buffer (tied ones under
    each of their names), detached, as the packages compiled from it name their constants."""
    out = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        out[name] = p.detach()
    for name, b in model.named_buffers(remove_duplicate=False):
        out[name] = b.detach()
    return out


def save_weights(model, path, extra=None):
    """Writes `model`'s weights (weights_of; `extra`: more tensors by name) to `path` in the
    format of a plan's weights: torch.save of a plain dict {name: tensor}, which libtorch reads
    with torch::pickle_load and Python with torch.load. Written beside, then renamed over `path`.
    PackageSet::replace_weights serves such a file."""
    weights = weights_of(model) if model is not None else {}
    weights.update(extra or {})
    return write_replacing(path, lambda tmp: torch.save(weights, tmp))


def write_replacing(path, write):
    """Calls write(temporary path) beside `path`, then renames the file over `path`: readers see
    the old file or the whole new one. Returns `path`."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    write(tmp)
    os.replace(tmp, path)
    return path


def weights_metadata(program, weights_file):
    """What a package compiled without its weights records of them (WEIGHTS_KEY): the file they
    come from and, for every tensor of the exported program (its parameters, buffers and tensor
    constants, by fully qualified name), the dtype, sizes and strides it was compiled for; the C++
    side checks each tensor it is given against them (AOTInductor checks names only)."""
    tensors = {}
    for name, t in list(program.state_dict.items()) + list(program.constants.items()):
        if isinstance(t, torch.Tensor):
            tensors[name] = {"dtype": str(t.dtype), "sizes": list(t.shape), "strides": list(t.stride())}
    return {"file": weights_file, "tensors": tensors}


def compile_package(model, doc, package_path, dynamic_shapes=None, inductor_configs=None, weights_file=None, plan_id=None):
    """Exports `model` with the observation file's example arguments (`doc`, the parsed file) and
    `dynamic_shapes` (default: the file's own spec; pass a dynamic_shapes.json's content or a
    spec torch.export takes for another style), compiles the program into `package_path` with
    optrace's guard metadata added to `inductor_configs`. With `weights_file` (a name beside
    plan.json), compiles it without its weights, which come from that file when it is loaded
    (compile_plan); with `plan_id`, records the plan it is compiled for (PLAN_KEY). Returns
    (package path, program)."""
    efo.require_torch()
    args, kwargs = efo.example_inputs(doc)
    if dynamic_shapes is None or isinstance(dynamic_shapes, dict) and "dynamic_shapes" in dynamic_shapes:
        dynamic_shapes = efo.dynamic_shapes(dynamic_shapes if dynamic_shapes is not None else doc)
    program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    configs = dict(inductor_configs or {})
    metadata = dict(configs.get("aot_inductor.metadata", {}))
    metadata[GUARD_KEY] = guard_text(program, doc.get("arg_names", []))
    if weights_file:
        configs.update(SHARED_WEIGHTS_CONFIGS)
        metadata[WEIGHTS_KEY] = json.dumps(weights_metadata(program, weights_file), separators=(",", ":"))
    if plan_id:
        metadata[PLAN_KEY] = plan_id
    configs["aot_inductor.metadata"] = metadata
    path = torch._inductor.aoti_compile_and_package(program, package_path=package_path, inductor_configs=configs)
    return path, program


def compile_plan(model, plan_path, inductor_configs=None, progress=print, shared_weights=True, reference=True):
    """Compiles every package of an optrace plan (`optrace plan ... -o DIR`; DIR/plan.json, or
    DIR) into the plan's folder: each with its own observation file's example arguments and the
    plan's named dynamic-shapes spec (its observed ranges), and optrace's guard metadata, as
    compile_package does. The packages hold no weights: they share one copy, written once as
    DIR/weights.pt (WEIGHTS_FILE), which PackageSet::load reads (shared_weights=False: each
    package holds its own, as compile_package compiles one). With `reference`, also writes the
    module the packages replace, with the same weights, as DIR/reference.pt (REFERENCE_FILE:
    torch.jit.script of `model`), for `optrace verify --reference` and PackageSet::fallback; a
    model TorchScript cannot script gets a line saying so, and no file. Returns the packages'
    paths, in the plan's order. `progress` gets one line per package (None: silent). Records in
    plan.json, as each package is done, what it takes as compiled (its guard metadata, as
    "guard", and its in_spec, as "in_spec"): `optrace drift` and `verify PLAN` judge calls by them."""
    import time

    efo.require_torch()
    if os.path.isdir(plan_path):
        plan_path = os.path.join(plan_path, "plan.json")
    folder = os.path.dirname(os.path.abspath(plan_path))
    plan = efo.read(plan_path)
    if plan.get("format") != "optrace.plan" or plan.get("version") != PLAN_VERSION:
        raise ValueError("%s: not an optrace plan of version %d" % (plan_path, PLAN_VERSION))
    paths = []
    constants = {}
    for i, package in enumerate(plan["packages"]):
        target = inside(folder, package["file"], plan_path)
        doc = efo.read(inside(folder, package["observations"], plan_path))
        started = time.time()
        path, program = compile_package(model, doc, target, dynamic_shapes=package["dynamic_shapes"],
                                         inductor_configs=inductor_configs,
                                         weights_file=WEIGHTS_FILE if shared_weights else None,
                                         plan_id=plan.get("id"))
        constants.update({k: v for k, v in program.constants.items() if isinstance(v, torch.Tensor)})
        if progress:
            progress("compiled %s (%d/%d, %d calls: %s) in %.1f s" % (package["file"], i + 1, len(plan["packages"]),
                                                                    package["calls"], package["structure"],
                                                                    time.time() - started))
        paths.append(path)
        # What the package takes, as compiled: drift and assign judge calls by it, and
        # PackageSet::load refuses a package compiled again apart. Recorded as each package is
        # done, so a compile that fails later keeps what is true of those before.
        package["guard"] = guard_text(program, doc.get("arg_names", []))
        package["in_spec"] = in_spec_text(program)
        write_replacing(plan_path, lambda tmp: write_json(tmp, plan))
    if shared_weights:
        save_weights(model, os.path.join(folder, WEIGHTS_FILE), extra=constants)
    if reference:
        save_reference(model, os.path.join(folder, REFERENCE_FILE), progress)
    return paths


def save_reference(model, path, progress=print):
    """Writes `model` as a TorchScript module (torch.jit.script) to `path`, beside, then renamed
    over it: what C++ loads with torch::jit::load to serve or compare the calls the packages do
    not take, with the packages' own weights. Returns the path, or None (with a line to
    `progress`) when TorchScript cannot script the model: then script or trace it yourself
    (torch.jit.trace(model, example_inputs)) from the same module."""
    try:
        scripted = torch.jit.script(model)
    except Exception as e:  # TorchScript refuses much that torch.export takes
        if progress:
            progress("no %s: torch.jit.script cannot script the model (%s)" % (
                os.path.basename(path), str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__))
        return None
    return write_replacing(path, scripted.save)


PLAN_VERSION = 1


def inside(folder, name, plan_path):
    """`folder/name`, refusing a name that leaves the folder (absolute, or with '..')."""
    parts = name.replace("\\", "/").split("/")
    if not name or os.path.isabs(name) or any(p in ("", ".", "..") for p in parts):
        raise ValueError("%s: %r is not a file name inside the plan's folder" % (plan_path, name))
    return os.path.join(folder, name)


def guard_text(program, arg_names=()):
    """guard_metadata as the text stored under GUARD_KEY (and in plan.json's "guard")."""
    return json.dumps(guard_metadata(program, arg_names), separators=(",", ":"))


def in_spec_text(program):
    """The exported program's in_spec as torch writes it (treespec_dumps): the tree a call's
    arguments are flattened by, which the package's call spec holds too. Recorded in plan.json
    beside the guard, so that drift and assign judge calls by the package's own check."""
    from torch.utils._pytree import treespec_dumps

    return treespec_dumps(program.call_spec.in_spec)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


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
    # A None argument (a call structure without the mask) is a leaf of the in_spec but no input of
    # the exported program: the C++ side flattens it to a None the guard checks, and run() takes
    # the tensors only.
    nones = sum(1 for _, value in flat if value is None) if len(flat) != len(placeholders) else 0
    if len(flat) - nones != len(placeholders):
        raise RuntimeError("guard_metadata: %d flat inputs, %d user placeholders" % (len(flat), len(placeholders)))
    ranges = {}
    inputs = []
    nodes = iter(placeholders)
    for key_path, value in flat:
        if nones and value is None:
            inputs.append({"path": input_path(key_path, arg_names), "kind": "NoneType", "value": None})
            continue
        val = next(nodes).meta.get("val")
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
    if len(sys.argv) == 3 and sys.argv[1] == "--plan":
        efo.require_torch()
        compile_plan(efo.Model(), sys.argv[2])
    elif len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    else:
        main(*sys.argv[1:])
