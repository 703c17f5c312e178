# torch.profiler with the CUDA activity around the computation tests/test_profiler.cpp profiles
# with optrace::Profiler on a GPU ("the kernels torch.profiler records"): prints the names of the
# kernels, copies and sets torch's own trace holds into NAMES.txt, one per line, in start order.
# usage: python3 torch_cuda_kernels.py OUT.json NAMES.txt
# Exits 77 where there is no CUDA device or torch.profiler cannot record CUDA (no Kineto).
import json
import sys

import torch

out, names_path = sys.argv[1], sys.argv[2]
if not torch.cuda.is_available() or not torch.autograd.kineto_available():
    print(f"torch {torch.__version__}: no CUDA device or no Kineto")
    sys.exit(77)


def work():
    a = torch.ones(256, 256, device="cuda")
    b = torch.mm(a, a)
    c = torch.relu(b)
    return c.sum().cpu()


work()  # the same warm-up as the C++ side: cuBLAS's handle and workspace made before recording
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts) as prof:
    work()
    torch.cuda.synchronize()
prof.export_chrome_trace(out)
events = json.load(open(out))["traceEvents"]
device = sorted((e["ts"], e["name"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
with open(names_path, "w") as f:
    f.writelines(name + "\n" for _, name in device)
