# torch.profiler (record_shapes) around a TorchScript function, as tests/test_profiler.cpp runs the
# same function under optrace::Profiler: the trace torch itself writes, for the comparison.
# usage: python3 torch_profile_script.py SOURCE.ts INPUTS.pt CALLS OUT.json
# INPUTS.pt: the inputs the C++ test saved with torch::pickle_save (a tuple of tensors). Exits 77 where
# torch.profiler cannot write a Kineto trace (torch < 2 or built without Kineto).
import sys

import torch

source, inputs_path, calls, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if not torch.autograd.kineto_available() or int(torch.__version__.split(".")[0]) < 2:
    print(f"torch {torch.__version__} cannot write a Kineto trace here")
    sys.exit(77)
cu = torch.jit.CompilationUnit(open(source).read())
inputs = list(torch.load(inputs_path))
# As the C++ side: the graph executor unoptimized (torch::jit::setGraphExecutorOptimize(false)).
with torch.jit.optimized_execution(False), torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(calls):
        cu.forward(*inputs)
prof.export_chrome_trace(out)
