# tests/python/distributed_gloo_traces.py: real torch.profiler traces of a 2-rank gloo
# data-parallel job (CPU), the input of `optrace summary --by rank`'s tests
# (tests/data/distributed_gloo_torch26/).
#
# Usage: python3 tests/python/distributed_gloo_traces.py OUT_DIR
#   Two processes (multiprocessing, spawn) join a gloo process group through a FileStore, train
#   a tiny MLP 3 steps with an all_reduce of each gradient, under torch.profiler with
#   schedule(wait=0, warmup=0, active=3) and tensorboard_trace_handler(OUT_DIR, worker_name=
#   "rank<R>"). Each rank's trace with steps is then gzip'd (OUT_DIR/rank<R>.*.pt.trace.json.gz). Rank 1
#   sleeps 20 ms per step so that it is the straggler (rank 0 waits for it in all_reduce).
import glob
import gzip
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, init_file, out_dir):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    schedule = torch.profiler.schedule(wait=0, warmup=0, active=3)
    handler = torch.profiler.tensorboard_trace_handler(out_dir, worker_name="rank%d" % rank)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                on_trace_ready=handler, record_shapes=True) as prof:
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            if rank == 1:
                time.sleep(0.02)  # the straggler
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world_size
            opt.step()
            prof.step()
    dist.destroy_process_group()


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    world_size = 2
    init_file = os.path.join(tempfile.mkdtemp(), "store")
    mp.spawn(worker, args=(world_size, init_file, out_dir), nprocs=world_size, join=True)
    for path in glob.glob(os.path.join(out_dir, "*.pt.trace.json")):
        # repeat=0: after step 3 a new window starts, and leaving the profiler writes it, empty (no
        # ProfilerStep): dropped (the committed data were kept this way, by hand).
        with open(path) as f:
            if "ProfilerStep#" not in f.read():
                os.remove(path)
                continue
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)


if __name__ == "__main__":
    main()
