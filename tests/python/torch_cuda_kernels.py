# torch.profiler with the CUDA activity around the computation tests/test_profiler.cpp profiles
# with optrace::Profiler on a GPU ("the kernels torch.profiler records"): prints the names of the
# kernels, copies and sets torch's own trace holds into NAMES.txt, one per line, in start order,
# each with its launch configuration (" grid=X,Y,Z block=X,Y,Z") or its " bytes=N".
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


def cupti(args):
    text = ""
    for key in ("grid", "block"):
        if key in args:
            text += f" {key}=" + ",".join(str(x) for x in args[key])
    if "bytes" in args:
        text += f" bytes={args['bytes']}"
    return text


device = sorted((e["ts"], e["name"] + cupti(e.get("args", {})))
                for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
with open(names_path, "w") as f:
    f.writelines(name + "\n" for _, name in device)
