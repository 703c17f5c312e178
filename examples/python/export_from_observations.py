"""Export a model with torch.export from the files an optrace InputObserver wrote (torch >= 2.6).

    python3 export_from_observations.py observations.json [dynamic_shapes.json]

The observation file holds, per input, its shape, dtype and strides (torch.export TensorMeta),
the inputs' treespec (`in_spec`), torch's DynamicShapesSpec and every distinct call signature
(`history`). This rebuilds example arguments from them (no user data was ever stored), loads the
spec with torch's own loader, hands both to torch.export.export, and runs the exported program
on every observed call signature. Replace `Model` with your own module; the functions are the
part to reuse:

    doc = read(path)
    args, kwargs = example_inputs(doc)          # tensors of the recorded shapes, dtypes, strides
    shapes = dynamic_shapes(doc)                # torch's _load_dynamic_shapes on the file's spec
    program = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=shapes)
    for args, kwargs, count, skip_reason in observed_inputs(doc):
        if not skip_reason: program.module()(*args, **kwargs)
"""
import json
import sys
from typing import Optional

import torch

from load_observations import rebuild

# _load_dynamic_shapes with from_dict=True, and torch.export reading its output: torch 2.6.
MIN_TORCH = (2, 6)


def require_torch():
    """Exits with a message (not a traceback) when this torch cannot export from the file."""
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH or not hasattr(torch, "export"):
        sys.exit("export_from_observations.py needs torch >= %d.%d (torch.export and "
                 "torch._export.serde.dynamic_shapes._load_dynamic_shapes); this is torch %s"
                 % (MIN_TORCH + (torch.__version__,)))


def read(path):
    with open(path) as f:
        return json.load(f)


def fill(t, generator=None, int_range=None):
    """Values for a rebuilt tensor: integers within `int_range` ([min, max], what the observer
    saw; an input's "int_range" in the file), else 0 or 1 (valid indices and labels), ones for
    bool, normal floats; the recorded strides are kept."""
    if t.dtype == torch.bool:
        return t.fill_(True)
    if t.is_floating_point() or t.is_complex():
        return t.copy_(torch.randn(t.shape, dtype=t.dtype, generator=generator))
    low, high = 0, 2
    if int_range is not None:
        info = torch.iinfo(t.dtype)
        high = min(max(int_range[1], info.min), info.max)
        low = min(max(int_range[0], info.min), high)
        if high < torch.iinfo(torch.int64).max:
            high += 1  # randint's high is exclusive
        low = min(low, high - 1)
    return t.copy_(torch.randint(low, high, t.shape, dtype=t.dtype, generator=generator))


def example_inputs(doc, device=None):
    """(args, kwargs) of the file's example call, rebuilt through its in_spec, its tensors on
    `device` (default: each on the device it was observed on)."""
    from torch.utils._pytree import tree_unflatten, treespec_loads

    leaves = []
    for entry in doc["inputs"]:
        meta = entry["meta"]
        leaves.append(fill(rebuild(meta, device), int_range=entry.get("int_range")) if meta is not None
                      else value(entry["value"], device))
    args, kwargs = tree_unflatten(leaves, treespec_loads(doc["in_spec"]))
    return tuple(args), dict(kwargs)


def dynamic_shapes(doc_or_spec):
    """torch's own loader on the file's `dynamic_shapes` (or a dynamic_shapes.json's content)."""
    from torch._export.serde.dynamic_shapes import _load_dynamic_shapes

    spec = doc_or_spec.get("dynamic_shapes", doc_or_spec) if "format" in doc_or_spec else doc_or_spec
    shapes = _load_dynamic_shapes(spec, from_dict=True)
    return tuple(shapes) if isinstance(shapes, list) else shapes


def int_ranges(doc):
    """{input name: [min, max]}: the integer inputs' observed values (files of format 1.2)."""
    return {e["name"]: e["int_range"] for e in doc["inputs"] if "int_range" in e}


def value(v, device=None, name=None, ranges=None):
    """A value as the file writes it (history calls, scalar inputs): null, `{"int": n}`,
    `{"tensor": TensorMeta}`, `{"list": [...]}`, ... as Python objects. `name` is the value's
    input name (`ids`, `batch.ids`, `cache[1]`, `extra["pos"]`): integer tensors take their
    range in `ranges` (int_ranges)."""
    if v is None:
        return None
    (kind, x), = [(k, w) for k, w in v.items() if k != "fields"]
    ranges = ranges or {}
    if kind == "tensor":
        return fill(rebuild(x, device), int_range=ranges.get(name))
    if kind in ("list", "tuple"):
        items = [value(i, device, "%s[%d]" % (name, k), ranges) for k, i in enumerate(x)]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: value(i, device, '%s["%s"]' % (name, k), ranges) for k, i in x.items()}
    if kind == "struct":
        return {k: value(i, device, "%s.%s" % (name, k), ranges) for k, i in v["fields"].items()}
    return x


def observed_inputs(doc, device=None):
    """Yields (args, kwargs, count, skip_reason) for every distinct observed call signature.
    skip_reason is None, or why the exported program cannot take the call as recorded: an
    argument value_if_missing stood in for, or one the call lacks."""
    names = doc["arg_names"]
    # The arguments the program takes tensors for: a call without one (None, or not passed)
    # took another path through the model than the export did.
    tensor_arguments = [n for n in names if any(e["argument"] == n and e["meta"] for e in doc["inputs"])]
    ranges = int_ranges(doc)
    for row in doc["history"]:
        call = row["call"]["dict"]
        stand_ins = row.get("stand_ins", [])
        lacking = [n for n in tensor_arguments if call.get(n) is None]
        reason = None
        if stand_ins:
            reason = "value_if_missing stood in for %s" % ", ".join(stand_ins)
        elif lacking:
            reason = "lacks %s" % ", ".join(lacking)
        values = {n: value(call[n], device, n, ranges) for n in names if n in call}
        if doc["keyed"]:
            yield (), values, row["count"], reason
        else:
            yield tuple(values.get(n) for n in names), {}, row["count"], reason


class Model(torch.nn.Module):
    """Stands in for the C++ demo's model: token ids and an optional attention mask."""

    def __init__(self, vocab=100, dim=32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None):
        x = self.embed(input_ids)
        if attention_mask is not None:
            x = x * attention_mask.unsqueeze(-1).to(x.dtype)
        return self.head(x)


def main(path, spec_path=None):
    require_torch()
    doc = read(path)
    args, kwargs = example_inputs(doc)
    shapes = dynamic_shapes(read(spec_path) if spec_path else doc)
    program = torch.export.export(Model(), args, kwargs=kwargs, dynamic_shapes=shapes)
    print(program)
    for args, kwargs, count, reason in observed_inputs(doc):
        if reason:
            print("skipped a signature (%d calls): %s" % (count, reason))
            continue
        program.module()(*args, **kwargs)
    print("the exported program ran every observed call signature it can take")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
