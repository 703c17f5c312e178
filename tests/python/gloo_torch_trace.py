"""Makes torch's own profile of a 2-rank gloo job (CPU): what optrace's distributed traces are checked against.

Usage: python3 gloo_torch_trace.py OUT_DIR
Writes OUT_DIR/kineto/rank<r>.pt.trace.json and OUT_DIR/et/rank<r>.et.json for ranks 0 and 1: two processes
over a FileStore (init_method="file://..."), a tiny linear model, gradients all-reduced, 3 steps under
torch.profiler with a schedule and an ExecutionTraceObserver.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule


def run(rank, world, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    et = ExecutionTraceObserver().register_callback(f"{out}/et/rank{rank}.et.json")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=2),
                 execution_trace_observer=et,
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/kineto/rank{rank}.pt.trace.json")) as prof:
        for _ in range(3):
            loss = model(torch.randn(2, 8)).sum()
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
            prof.step()
    et.unregister_callback()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(f"{out}/kineto", exist_ok=True)
    os.makedirs(f"{out}/et", exist_ok=True)
    store = tempfile.mkdtemp() + "/store"
    mp.spawn(run, args=(2, "file://" + store, out), nprocs=2)
