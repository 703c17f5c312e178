"""The plan benchmarks/serve_weights.sh measures: a model of about 270 MB of weights that every
call reads (Big, below), the serve_e2e traffic observed by
observe_scripted, planned into 4 packages (optrace plan --max-packages 4), compiled by compile_plan
(one copy of the weights: weights.pt), plus the first package compiled the old way (its weights
inside: single.pt2) and a second checkpoint (weights_v2.pt). Prints what each takes on disk.

    python3 benchmarks/serve_weights.py BUILD_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "examples", "python"))
sys.path.insert(0, os.path.join(here, "..", "tests", "export"))

import torch  # noqa: E402
from typing import Optional  # noqa: E402

import compile_package as cp  # noqa: E402
import export_from_observations as efo  # noqa: E402
from serve_e2e import save_calls, traffic  # noqa: E402


class Big(torch.nn.Module):
    """The demo model's signature (token ids, an optional mask) with about 270 MB of weights that
    every call reads: 16 tables of 2,048 x 2,048 whose means shift the embedding. (Debian's torch
    multiplies matrices with a generic BLAS, about 2 GFLOPS a core: a model whose every weight
    multiplies every token would take seconds a call here; this one reads every byte, as a
    transformer's call does, in tens of milliseconds.)"""

    def __init__(self, vocab=100, dim=32, tables=16, side=2048):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.tables = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(side, side) * 0.01) for _ in range(tables)])
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None):
        x = self.embed(input_ids)
        if attention_mask is not None:
            x = x * attention_mask.unsqueeze(-1).to(x.dtype)
        for t in self.tables:
            x = x + t.mean()
        return self.head(x)


def mb(path):
    return os.path.getsize(path) / 1e6


def main(build, work):
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model = Big().eval()
    weights = sum(t.numel() * t.element_size() for t in cp.weights_of(model).values()) / 1e6
    scripted = os.path.join(work, "model.pt")
    torch.jit.script(model).save(scripted)
    calls = (traffic([(2, 5), (1, 7), (3, 9), (4, 16), (4, 12), (2, 12), (1, 30), (4, 40)], True) +
             traffic([(2, 6), (3, 10), (2, 5), (1, 24)], False))
    calls_path = os.path.join(work, "calls.pt")
    save_calls(calls, calls_path)
    subprocess.run([os.path.join(build, "tests", "observe_scripted"), scripted, calls_path, work], check=True,
                   stdout=subprocess.DEVNULL)
    plan = os.path.join(work, "plan")
    subprocess.run([os.path.join(build, "examples", "optrace"), "plan", os.path.join(work, "observations.json"),
                    "-o", plan, "--max-packages", "4", "--force"], check=True)
    started = time.time()
    paths = cp.compile_plan(model, plan)
    shared_s = time.time() - started
    p0 = efo.read(os.path.join(plan, "plan.json"))["packages"][0]
    started = time.time()
    single, _ = cp.compile_package(model, efo.read(os.path.join(plan, p0["observations"])),
                                   os.path.join(work, "single.pt2"), dynamic_shapes=p0["dynamic_shapes"])
    single_s = time.time() - started
    shutil.copy(os.path.join(plan, p0["observations"]), os.path.join(work, "single.observations.json"))
    tuned = Big().eval()
    cp.save_weights(tuned, os.path.join(work, "weights_v2.pt"))
    print("weights: %.0f MB of tensors; weights.pt %.0f MB" % (weights, mb(os.path.join(plan, cp.WEIGHTS_FILE))))
    print("plan of %d packages compiled in %.0f s: %s MB; with weights.pt %.0f MB on disk" % (
        len(paths), shared_s, " + ".join("%.1f" % mb(p) for p in paths),
        sum(mb(p) for p in paths) + mb(os.path.join(plan, cp.WEIGHTS_FILE))))
    print("one package with its weights inside compiled in %.0f s: %.0f MB (4 such: %.0f MB)" % (
        single_s, mb(single), 4 * mb(single)))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
