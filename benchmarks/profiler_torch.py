# torch.profiler measured as bench_profiler measures optrace::Profiler (benchmarks/profiler.sh):
# a TorchScript resnet18 forward on CPU, 2x3x112x112, one thread.
#   python3 profiler_torch.py MODEL.pt [ROUNDS] [STEPS]
#   python3 profiler_torch.py --cuda [ITERATIONS]   (bench_profiler --cuda's window, on a GPU)
# With torch < 2 or without Kineto it only writes MODEL.pt (torchvision's resnet18, scripted).
import os
import statistics
import sys
import tempfile
import time

import torch


def stop_and_export(prof):
    """Times the profiler's __exit__ and export_chrome_trace (into a temporary file, removed):
    (exit s, export s, events, bytes)."""
    t0 = time.perf_counter()
    prof.__exit__(None, None, None)
    exit_s = time.perf_counter() - t0
    out = os.path.join(tempfile.mkdtemp(), "torch.pt.trace.json")
    t0 = time.perf_counter()
    prof.export_chrome_trace(out)
    export_s = time.perf_counter() - t0
    size = os.path.getsize(out)
    os.remove(out)
    return exit_s, export_s, len(prof.events()), size


def cuda_window(iterations):
    """bench_profiler --cuda's window: relu(mm(a, a)) on 64x64 CUDA tensors, with CPU and CUDA
    activities, record_shapes and profile_memory; __exit__ and export_chrome_trace timed."""
    if not torch.cuda.is_available():
        print("no CUDA device: the --cuda mode not measured")
        return
    a = torch.randn(64, 64, device="cuda")
    with torch.no_grad():
        for _ in range(10):
            torch.relu(torch.mm(a, a))
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        prof = torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True)
        prof.__enter__()
        t0 = time.perf_counter()
        for _ in range(iterations):
            torch.relu(torch.mm(a, a))
        torch.cuda.synchronize()
        run_s = time.perf_counter() - t0
        exit_s, export_s, events, size = stop_and_export(prof)
    print(f"torch {torch.__version__}: cuda window: {iterations} iterations of relu(mm) in {run_s:.3f} s; {events} events, "
          f"{size / 1e6:.1f} MB; __exit__ {exit_s:.4f} s, export_chrome_trace {export_s:.4f} s: {exit_s + export_s:.4f} s in all")


if len(sys.argv) > 1 and sys.argv[1] == "--cuda":
    cuda_window(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
    sys.exit(0)

import torchvision  # noqa: E402

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
    exit_s, export_s, events, size = stop_and_export(prof)
    print(f"torch {torch.__version__}: 50 steps: {events} events, {size / 1e6:.1f} MB; __exit__ {exit_s:.4f} s, "
          f"export_chrome_trace {export_s:.4f} s: {exit_s + export_s:.4f} s in all ({(exit_s + export_s) * 1e6 / events:.2f} us per event)")
