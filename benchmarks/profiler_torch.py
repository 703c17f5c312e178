# torch.profiler measured as bench_profiler measures optrace::Profiler (benchmarks/profiler.sh):
# a TorchScript resnet18 forward on CPU, 2x3x112x112, one thread.
#   python3 profiler_torch.py MODEL.pt [ROUNDS] [STEPS]
# With torch < 2 or without Kineto it only writes MODEL.pt (torchvision's resnet18, scripted).
import os
import statistics
import sys
import tempfile
import time

import torch
import torchvision

path = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
if not os.path.exists(path):
    torch.jit.script(torchvision.models.resnet18().eval()).save(path)
if not torch.autograd.kineto_available():
    print(f"torch {torch.__version__}: no Kineto, torch.profiler not measured")
    sys.exit(0)
torch.set_num_threads(1)
model = torch.jit.load(path).eval()
x = torch.randn(2, 3, 112, 112)
activities = [torch.profiler.ProfilerActivity.CPU]
with torch.no_grad():
    for _ in range(5):
        model(x)
    plain, profiled = [], []
    for _ in range(rounds):
        for _ in range(steps):
            t0 = time.perf_counter()
            model(x)
            plain.append(time.perf_counter() - t0)
        with torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True):
            for _ in range(steps):
                t0 = time.perf_counter()
                model(x)
                profiled.append(time.perf_counter() - t0)
    p, q = statistics.median(plain), statistics.median(profiled)
    print(f"torch {torch.__version__}: step unprofiled {p * 1e3:.3f} ms, profiled (record_shapes, profile_memory) "
          f"{q * 1e3:.3f} ms: {q / p:.3f}x (median of {rounds} rounds x {steps} steps)")
    prof = torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True)
    prof.__enter__()
    for _ in range(50):
        model(x)
    t0 = time.perf_counter()
    prof.__exit__(None, None, None)
    exit_s = time.perf_counter() - t0
    out = os.path.join(tempfile.mkdtemp(), "torch.pt.trace.json")
    t0 = time.perf_counter()
    prof.export_chrome_trace(out)
    export_s = time.perf_counter() - t0
    events = len(prof.events())
    size = os.path.getsize(out)
    os.remove(out)
    print(f"torch {torch.__version__}: 50 steps: {events} events, {size / 1e6:.1f} MB; __exit__ {exit_s:.4f} s, "
          f"export_chrome_trace {export_s:.4f} s: {exit_s + export_s:.4f} s in all ({(exit_s + export_s) * 1e6 / events:.2f} us per event)")
