"""OpTracer against the reference Python tracer on real architectures, then a checked replay.

Usage: tracer_parity.py MODEL TRACE_SCRIPTED OPTRACE_CLI WORK_DIR

For MODEL (resnet18, mobilenet_v3_small, convnext_tiny, vit, lstm, strided_linear, or
torchvision:NAME for any torchvision classifier): builds it (no weights: nothing is downloaded), scripts it with
torch.jit.script, saves it and three calls' inputs of varying batch and size, then
- records the calls with the reference tracer (tests/python/dispatch_tracer.py's
  TorchDispatchMode) and with OpTracer in C++ (TRACE_SCRIPTED, tests/models/trace_scripted.cpp);
- asserts both traces equal: the same ops in the same order, each with the same calls and the
  same unique inputs in the same order;
- replays OpTracer's trace on the CPU in check mode (`optrace replay --check`) and asserts no
  input errored or mismatched.
Exits 0 on success, 1 on a difference (printed), 77 (skipped) where torch or torchvision is
missing.
"""
import json
import os
import subprocess
import sys

try:
    import torch
    import torchvision
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from dispatch_tracer import Tracer  # noqa: E402


class LSTMModel(torch.nn.Module):
    """A batch-first 2-layer LSTM, its output sequence only (what a C++ caller keeps)."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


class StridedLinear(torch.nn.Module):
    """nn.Linear on a non-contiguous 4-D input: linear's kernel adds the bias after matmul, with
    add_ in C++ and add under a Python dispatch mode (a context rule, dispatcher.hpp)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.linear(x.transpose(1, 2))


def images(*sizes):
    return [[torch.randn(b, 3, s, s)] for b, s in sizes]


def model_and_calls(name):
    tv = torchvision.models
    if name == "resnet18":
        return tv.resnet18(weights=None), images((1, 224), (2, 160), (1, 192))
    if name == "mobilenet_v3_small":
        return tv.mobilenet_v3_small(weights=None), images((1, 224), (2, 160), (1, 192))
    if name == "convnext_tiny":
        return tv.convnext_tiny(weights=None), images((1, 64), (2, 96), (1, 64))
    if name == "vit":
        vit = tv.vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                      hidden_dim=32, mlp_dim=64, num_classes=10)
        return vit, images((1, 32), (3, 32), (2, 32))
    if name == "lstm":
        return LSTMModel(), [[torch.randn(b, t, 16)] for b, t in ((1, 5), (3, 7), (2, 5))]
    if name == "strided_linear":
        return StridedLinear(), [[torch.randn(b, 3, 4, 8)] for b in (1, 2, 1)]
    if name.startswith("torchvision:"):
        return getattr(tv, name.split(":", 1)[1])(weights=None), images((1, 224), (2, 160), (1, 192))
    raise SystemExit(f"unknown model {name!r}")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def compare(ours, ref):
    """Every difference between two hf op traces, as lines; empty when equal."""
    diffs = []
    if list(ours) != list(ref):
        only_ours = [op for op in ours if op not in ref]
        only_ref = [op for op in ref if op not in ours]
        diffs.append(f"ops differ: only optrace {only_ours}, only reference {only_ref}")
        if not only_ours and not only_ref:
            diffs.append(f"order: optrace {list(ours)}\n       reference {list(ref)}")
    for op in ours:
        if op not in ref:
            continue
        a, b = ours[op], ref[op]
        if a["total_calls"] != b["total_calls"]:
            diffs.append(f"{op}: total_calls {a['total_calls']} (optrace) != {b['total_calls']} (reference)")
        if a["unique_inputs"] != b["unique_inputs"]:
            for i, (x, y) in enumerate(zip(a["unique_inputs"], b["unique_inputs"])):
                if x != y:
                    diffs.append(f"{op}: unique input {i}:\n  optrace   {json.dumps(x)}\n  reference {json.dumps(y)}")
                    break
            if len(a["unique_inputs"]) != len(b["unique_inputs"]):
                diffs.append(f"{op}: {len(a['unique_inputs'])} unique inputs (optrace) != "
                             f"{len(b['unique_inputs'])} (reference)")
    return diffs


def scripted_model(name, work):
    """MODEL scripted and saved in WORK as trace_scripted reads it (model.pt, calls.txt: one call per
    line, float32 shapes), with the graph executor's optimizations off as trace_scripted runs it.
    Returns (scripted module, calls, model path, calls path)."""
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model, calls = model_and_calls(name)
    model.eval()
    scripted = torch.jit.script(model)
    model_path, calls_path = os.path.join(work, "model.pt"), os.path.join(work, "calls.txt")
    scripted.save(model_path)
    with open(calls_path, "w") as f:  # trace_scripted's format: shapes (float32, randn values)
        for call in calls:
            f.write(";".join(",".join(str(s) for s in t.shape) for t in call) + "\n")
    torch._C._set_graph_executor_optimize(False)
    return scripted, calls, model_path, calls_path


def main(name, trace_scripted, cli, work):
    scripted, calls, model_path, calls_path = scripted_model(name, work)
    ours_path, ref_path = os.path.join(work, "optrace.json"), os.path.join(work, "reference.json")
    tracer = Tracer()
    with torch.no_grad(), tracer:
        for call in calls:
            scripted(*call)
    with open(ref_path, "w") as f:
        json.dump(tracer.result(), f, indent=1)

    run = subprocess.run([trace_scripted, model_path, calls_path, ours_path], capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        fail(f"trace_scripted exited {run.returncode}")
    with open(ours_path) as f:
        ours = json.load(f)
    ref = tracer.result()
    diffs = compare(ours, ref)
    if diffs:
        fail(f"{name}: OpTracer and the reference differ ({len(diffs)}):\n" + "\n".join(diffs))
    print(f"{name}: {len(ours)} ops, {sum(e['total_calls'] for e in ours.values())} calls: equal to the reference")

    replay_check(name, cli, ours_path, os.path.join(work, "replay.json"))


def replay_check(name, cli, trace_path, report_path, what="replay --check on cpu"):
    """`optrace replay TRACE --device cpu --check`: fails unless every input is ok or skipped."""
    if os.path.exists(report_path):  # none left by an earlier run
        os.remove(report_path)
    run = subprocess.run([cli, "replay", trace_path, "--device", "cpu", "--check", "--no-progress",
                          "--json", report_path, "--force"], capture_output=True, text=True)
    if not os.path.exists(report_path):
        fail(f"{name}: replay --check wrote no report (exit {run.returncode})\n{run.stdout}{run.stderr}")
    with open(report_path) as f:
        report = json.load(f)
    bad = [r for r in report["results"] if r["status"] not in ("ok", "skipped")]
    for r in bad:
        print(f"  {r['status']}: {r['op']} #{r['index']}: {r.get('message', '')}")
    if bad or run.returncode != 0:
        fail(f"{name}: replay --check: {len(bad)} inputs not ok (exit {run.returncode})\n{run.stderr}")
    statuses = {}
    for r in report["results"]:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"{name}: {what}: {statuses}")

if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
