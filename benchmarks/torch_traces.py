"""Real profiler traces of torchvision models training, for bench_kineto_files (kineto_files.sh).

Usage: python3 benchmarks/torch_traces.py OUT_DIR [STEPS]

Writes OUT_DIR/<model>_train.pt.trace.json: STEPS (default 15) training steps (forward, loss,
backward, SGD step) of torchvision's mobilenet_v3_small and resnet18 (random weights: no
download) on a batch of 8 random 3x224x224 images, profiled by torch.profiler on the CPU with
record_shapes=True, as a user profiles a training loop. Meant for torch 2.6 in the trixie chroot:
    bash .ci/trixie.sh --run 'python3 benchmarks/torch_traces.py build-trixie/benchmarks/torch-traces'
"""
import os
import sys
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile


def main(out, steps):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name in ("mobilenet_v3_small", "resnet18"):
        model = getattr(torchvision.models, name)(weights=None, num_classes=10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        images, labels = torch.randn(8, 3, 224, 224), torch.randint(0, 10, (8,))
        path = os.path.join(out, f"{name}_train.pt.trace.json")
        start = time.time()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(steps):
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                loss.backward()
                optimizer.step()
        prof.export_chrome_trace(path)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB, torch {torch.__version__}, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15)
