"""Makes torch's own execution traces of real models, with the Kineto trace of the same window.

Usage: python3 execution_trace_models.py OUT_DIR [MODEL ...]
Writes OUT_DIR/<model>.et.json and OUT_DIR/<model>.pt.trace.json for each model, and
OUT_DIR/<model>.kineto_only.pt.trace.json of the next step without the observer (default: the
first two, which tests/data/execution_trace holds; the others feed docs/replay.md's table):
  mobilenet_v3_small  torchvision's, eval, one 1x3x64x64 image (no weights: random init)
  resnet18            torchvision's, eval, one 1x3x64x64 image
  transformer         a 2-layer nn.TransformerEncoder's training step (d_model 64, 4 heads,
                      batch 4 x 16 tokens) with foreach Adam
  train_step          a small conv net's training step: forward, cross-entropy, backward, and
                      SGD with momentum (foreach: tensor-list ops)
Each is recorded as torch.profiler records it (record_shapes, one active step) with an
ExecutionTraceObserver over the same window, on the CPU, with torch's seed 0.
"""
import os
import sys

import torch
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule


def mobilenet_v3_small():
    import torchvision

    model = torchvision.models.mobilenet_v3_small(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)

    def step():
        with torch.no_grad():
            model(x)

    return step


def train_step():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def resnet18():
    import torchvision

    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)

    def step():
        with torch.no_grad():
            model(x)

    return step


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(4, 16, 64), torch.randint(0, 10, (4 * 16,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x).reshape(-1, 10), y).backward()
        opt.step()

    return step


MODELS = {"mobilenet_v3_small": mobilenet_v3_small, "train_step": train_step, "resnet18": resnet18, "transformer": transformer}
DEFAULT = ["mobilenet_v3_small", "train_step"]  # the ones tests/data/execution_trace holds


def record(name, out):
    torch.manual_seed(0)
    step = MODELS[name]()
    step()  # warm: the traced step is a steady one
    et = ExecutionTraceObserver().register_callback(f"{out}/{name}.et.json")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=1),
                 execution_trace_observer=et,
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/{name}.pt.trace.json")) as prof:
        for _ in range(2):
            step()
            prof.step()
    et.unregister_callback()
    # The next step, with Kineto alone: the times the step takes without the observer, which
    # writes each node inside its op's span (benchmarks/execution_replay_side_by_side.sh).
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/{name}.kineto_only.pt.trace.json")) as prof:
        for _ in range(2):
            step()
            prof.step()


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for name in sys.argv[2:] or DEFAULT:
        record(name, out)
