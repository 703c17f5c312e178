# What torch.profiler itself writes and prints for a small CUDA training loop: the reference that
# optrace's KeyAverages (CUDA columns) and the consumer checks are compared with in CI, which has
# no GPU. Run on a GPU machine; writes into OUT_DIR:
#   torch_cuda.pt.trace.json.gz   the Kineto trace (export_chrome_trace)
#   torch_cuda_tables.json        {"torch": version, "tables": {sort_by: key_averages().table(...)},
#                                  "grouped": {sort_by: key_averages(group_by_input_shape=True).table(...)}}
# usage: python3 tests/gpu/torch_cuda_fixture.py OUT_DIR
import gzip
import json
import os
import shutil
import sys

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
assert torch.cuda.is_available(), "no CUDA device"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 64, device="cuda")
y = torch.randint(0, 10, (32,), device="cuda")


def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


step()  # cuBLAS and the allocator warmed up before recording
torch.cuda.synchronize()
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts, record_shapes=True, profile_memory=True) as prof:
    for _ in range(2):
        step()
    torch.cuda.synchronize()
plain = os.path.join(out, "torch_cuda.pt.trace.json")
prof.export_chrome_trace(plain)
with open(plain, "rb") as src, gzip.open(plain + ".gz", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.remove(plain)
keys = ["self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
        "self_device_time_total", "device_time_total", "count", "self_cpu_memory_usage",
        "self_cuda_memory_usage", "self_device_memory_usage"]
tables, grouped = {}, {}
for key in keys:
    try:
        tables[key] = prof.key_averages().table(sort_by=key, row_limit=-1)
        grouped[key] = prof.key_averages(group_by_input_shape=True).table(sort_by=key, row_limit=-1)
    except Exception as e:  # a name this torch does not know
        tables[key] = grouped[key] = f"error: {type(e).__name__}: {e}"
with open(os.path.join(out, "torch_cuda_tables.json"), "w") as f:
    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "tables": tables,
               "grouped": grouped}, f, indent=1)
print(tables["self_cpu_time_total"])
