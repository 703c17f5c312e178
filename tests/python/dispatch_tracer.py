"""optrace's reference: a Python TorchDispatchMode op tracer writing the hf op-trace schema.

Usage: dispatch_tracer.py SOURCE.ts INPUTS.json OUT.json [--backward] [--exclude OP,OP]
       dispatch_tracer.py --batch JOBS.txt   (one job a line, each the arguments above: one
                                              Python start and torch import for all of them)

SOURCE.ts is TorchScript source defining `forward(...)` (compiled with torch.jit.CompilationUnit,
resolving `torch.X` as C++'s torch::jit::compile does);
INPUTS.json lists the calls, each a list of positional inputs {"shape": [...], "dtype": "torch.float32"}
(float inputs: randn; integer inputs: arange(n) % 7 + 1, reshaped; bool inputs: arange(n) % 2 == 0).
Runs every call under torch.no_grad() with the graph executor's optimizations off, recording
every op the dispatch mode sees, and writes the aggregated trace with json.dump(indent=1).
With --backward, floating inputs require grad and each call is followed by
`forward(...).sum().backward()`, recorded too (a training step's ops). --exclude leaves ops
out by name ("detach.default"), as OpTracerOptions::exclude_ops does.

The rules (what optrace's OpTracer reproduces):
- the op name is OpOverload.__name__ ("addmm.default");
- each positional argument (PyTorch drops trailing defaults and keyword-only ones before calling
  __torch_dispatch__): a tensor gives its shape and str(dtype); a list of tensors becomes a
  {"tensor_list_ref": i} entry in tensor_lists; a torch.dtype its str(); anything else itself,
  with str(type(arg)) as its type (json writes torch.device / layout / memory_format with str());
- unique inputs are counted; ops in first-seen order; unique inputs by count, descending,
  ties in first-seen order.
"""
import json
import sys
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def describe(args):
    shapes, dtypes, values, lists = [], [], [], {}
    for arg in args:
        if isinstance(arg, torch.Tensor):
            shapes.append(list(arg.shape))
            dtypes.append(str(arg.dtype))
            values.append(None)
        elif isinstance(arg, list) and any(isinstance(a, torch.Tensor) for a in arg):
            ref = len(lists)
            lists[str(ref)] = {
                "length": len(arg),
                "shapes": [list(a.shape) if isinstance(a, torch.Tensor) else None for a in arg],
                "dtypes": [str(a.dtype) if isinstance(a, torch.Tensor) else str(type(a)) for a in arg],
            }
            shapes.append(None)
            dtypes.append(str(type(arg)))
            values.append({"tensor_list_ref": ref})
        elif isinstance(arg, torch.dtype):
            shapes.append(None)
            dtypes.append(str(type(arg)))
            values.append(str(arg))
        elif isinstance(arg, (torch.device, torch.layout, torch.memory_format)):
            shapes.append(None)
            dtypes.append(str(type(arg)))
            values.append(str(arg))
        else:
            shapes.append(None)
            dtypes.append(str(type(arg)))
            values.append(list(arg) if isinstance(arg, tuple) else arg)
    return shapes, dtypes, values, lists


class Tracer(TorchDispatchMode):
    def __init__(self, exclude=()):
        super().__init__()
        self.exclude = set(exclude)
        self.ops = {}  # name -> {key: [record, count]} (dicts keep first-seen order)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__
        if name in self.exclude:
            return func(*args, **(kwargs or {}))
        shapes, dtypes, values, lists = describe(args)
        # repr() tells 1 from 1.0 from True, as the schema's type strings do
        key = repr((shapes, dtypes, values, lists))
        entry = self.ops.setdefault(name, {})
        if key in entry:
            entry[key][1] += 1
        else:
            entry[key] = [{"op_name": name, "input_shapes": shapes, "input_dtypes": dtypes,
                           "non_tensor_inputs": values, "tensor_lists": lists}, 1]
        return func(*args, **(kwargs or {}))

    def result(self):
        out = {}
        for name, entry in self.ops.items():
            inputs = sorted(entry.values(), key=lambda rc: -rc[1])  # stable: ties keep first-seen order
            out[name] = {
                "total_calls": sum(c for _, c in inputs),
                "unique_input_count": len(inputs),
                "unique_inputs": [dict(r, count=c) for r, c in inputs],
            }
        return out


def make_input(spec):
    shape, dtype = spec["shape"], getattr(torch, spec["dtype"].replace("torch.", ""))
    n = 1
    for s in shape:
        n *= s
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return (torch.arange(n) % 2 == 0).reshape(shape)
    return (torch.arange(n) % 7 + 1).to(dtype).reshape(shape)


def compile_as_cpp(source):
    """TorchScript source compiled as C++'s torch::jit::compile reads it: there `torch.X` names
    every aten op (torch.linear, torch.linalg_svdvals), where Python's torch module has some only
    under torch._C._nn / torch._C._linalg."""
    shim = types.ModuleType("torch")
    shim.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    for namespace in (torch._C._nn, torch._C._linalg):
        for k in dir(namespace):
            if not k.startswith("_") and not hasattr(shim, k):
                setattr(shim, k, getattr(namespace, k))
    cu = torch.jit.CompilationUnit()
    cu.define(source, rcb=lambda name: shim if name == "torch" else None)
    return cu


def trace(source_path, inputs_path, out_path, options):
    backward = "--backward" in options
    exclude = options[options.index("--exclude") + 1].split(",") if "--exclude" in options else []
    with open(source_path) as f:
        cu = compile_as_cpp(f.read())
    with open(inputs_path) as f:
        calls = [[make_input(s) for s in call] for call in json.load(f)]
    torch._C._set_graph_executor_optimize(False)
    tracer = Tracer(exclude)
    if backward:
        for call in calls:
            for x in call:
                if x.dtype.is_floating_point:
                    x.requires_grad_(True)
        with tracer:
            for call in calls:
                cu.forward(*call).sum().backward()
    else:
        with torch.no_grad():
            with tracer:
                for call in calls:
                    cu.forward(*call)
    with open(out_path, "w") as f:
        json.dump(tracer.result(), f, indent=1)


def main():
    if sys.argv[1:2] == ["--batch"]:
        with open(sys.argv[2]) as f:
            for line in f:
                if line.strip():
                    args = line.split()
                    trace(args[0], args[1], args[2], args[3:])
    else:
        trace(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])


if __name__ == "__main__":
    main()
