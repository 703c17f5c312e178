"""Rebuild export arguments from an optrace observation file, with Python's json and torch only.

    python3 load_observations.py observations.json

Prints each input's shape, dtype, strides and dynamic dims. The same arguments and the
dynamic-shapes spec are what export_from_observations.py hands to torch.export.export.
"""
import json
import sys

import torch

# torch.export's serialization schema numbers dtypes its own way (schema.py, ScalarType).
SCHEMA_DTYPES = {
    1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64,
    6: torch.float16, 7: torch.float32, 8: torch.float64, 9: getattr(torch, "complex32", None),
    10: torch.complex64, 11: torch.complex128, 12: torch.bool, 13: torch.bfloat16,
}


def sym_int(value):
    """(int value, symbol or None) of a SymInt union."""
    if "as_int" in value:
        return value["as_int"], None
    expr = value["as_expr"]
    return expr["hint"]["as_int"], expr["expr_str"]


def recorded_device(meta):
    """The device the tensor was observed on (TensorMeta's `device`: type and index)."""
    d = meta.get("device") or {"type": "cpu"}
    return torch.device(d["type"]) if d.get("index") is None else torch.device(d["type"], d["index"])


def rebuild(meta, device=None):
    """An uninitialized tensor with the recorded shape, dtype, strides and storage offset, on
    `device` (default: the device it was observed on)."""
    device = recorded_device(meta) if device is None else device
    sizes = [sym_int(s)[0] for s in meta["sizes"]]
    strides = [sym_int(s)[0] for s in meta["strides"]]
    offset = sym_int(meta["storage_offset"])[0]
    dtype = SCHEMA_DTYPES[meta["dtype"]]
    extent = 1 + offset + sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else 0
    storage = torch.empty(extent, dtype=dtype, device=device)
    return storage.as_strided(sizes, strides, offset)


def load(path, device=None):
    with open(path) as f:
        doc = json.load(f)
    tensors = {}
    for entry in doc["inputs"]:
        if entry["meta"] is not None:
            tensors[entry["name"]] = (rebuild(entry["meta"], device), entry["meta"])
    return doc, tensors


def main(path):
    doc, tensors = load(path)
    for name, (t, meta) in tensors.items():
        dynamic = {i: sym_int(s)[1] for i, s in enumerate(meta["sizes"]) if sym_int(s)[1] is not None}
        print("%s: shape %s dtype %s strides %s dynamic %s" % (name, tuple(t.shape), t.dtype, t.stride(), dynamic))
    ranges = {k: (v["min_val"], v["max_val"]) for k, v in doc["range_constraints"].items()}
    print("range_constraints: %s" % ranges)


if __name__ == "__main__":
    main(sys.argv[1])
