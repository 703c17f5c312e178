"""`optrace summary --by time` against torch's own key_averages(), on the trace the same run exported.

Usage: key_averages_parity.py OPTRACE_CLI WORK_DIR

Profiles a small TorchScript model (torch.jit.script of a module with conv, relu, cat, linear and
softmax) under torch.profiler.profile(activities=[CPU], record_shapes=True), once without and once
with profile_memory (profile_scripted: a few calls, each in two nested record_function("step")
ranges, which torch merges into one call, and one in two nested "outer" ranges beside a
torch.add, which it does not), exports each Kineto trace, and asserts that optrace, reading the
file, gives what torch's prof.key_averages() gives in memory:
- the same rows: the same (name, user annotation) keys, and with --group-by-shape the same
  (name, input shapes) keys, each with the same number of calls;
- self CPU times within 1% or 1 us of torch's; with profile_memory, the same CPU memory;
- the same table text as prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1),
  character for character, grouped by input shape too.

Rows torch has that a file cannot: torch's in-memory list holds every event of the profiler's
result, and the trace file holds them all for a CPU profile (cpu_op and user_annotation events,
"[memory]" records). It could not hold events whose start and end are on different threads
(torch's async events, which have no self time) or "[OutOfMemory]" records; a CPU run of this
model makes none, and FILE_CANNOT_HOLD (empty) says so: any row of torch's that optrace lacks
fails the test, named.

Exits 77 (skipped) where torch is older than 2.6 or missing. tests/python/key_averages_golden.py
writes the same run's trace and tables as test data.
"""
import json
import os
import subprocess
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 6):
    print(f"SKIPPED: torch {torch.__version__} < 2.6 (the parity is with torch 2.6's profiler_util)")
    sys.exit(77)

from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

# Rows of torch's key_averages() no trace file can hold (see the docstring): none here.
FILE_CANNOT_HOLD = set()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = torch.cat([y, y], 0)[: x.shape[0]]
        return torch.softmax(self.fc(y.flatten(1)), -1)


def profile_scripted(profile_memory):
    """The profiled run (see the docstring); returns the profiler."""
    torch.manual_seed(0)
    model = torch.jit.script(Net().eval())
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        for _ in range(3):  # the profiling executor settles on its graph first
            model(x)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=profile_memory) as prof:
            for _ in range(3):
                with record_function("step"):
                    with record_function("step"):  # alone in the outer "step": torch merges the two
                        model(x)
            with record_function("outer"):
                with record_function("outer"):  # beside a sibling: a call of its own
                    model(x)
                torch.add(x, 1)
    return prof


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def optrace(cli, *args):
    run = subprocess.run([cli, "summary", "--by", "time", *args], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"optrace summary --by time {' '.join(args)} exited {run.returncode}: {run.stderr}")
    return run.stdout


def check(cli, work, profile_memory):
    prof = profile_scripted(profile_memory)
    name = "memory" if profile_memory else "plain"
    trace = os.path.join(work, f"{name}.pt.trace.json")
    prof.export_chrome_trace(trace)

    for grouped in (False, True):
        what = f"{name}{', grouped by input shape' if grouped else ''}"
        extra = ["--group-by-shape"] if grouped else []
        ours = json.loads(optrace(cli, trace, "--json", *extra))
        theirs = prof.key_averages(group_by_input_shape=grouped)

        def key(name, user_annotation, shapes):
            return (name, bool(user_annotation), shapes if grouped else None)

        mine = {key(r["name"], r["user_annotation"], r.get("input_shapes")): r for r in ours}
        torch_rows = {key(e.key, e.is_user_annotation, str(e.input_shapes)): e for e in theirs}
        if len(mine) != len(ours):
            fail(f"{what}: optrace gave a key twice")
        missing = sorted(set(torch_rows) - set(mine) - FILE_CANNOT_HOLD, key=str)
        extra_rows = sorted(set(mine) - set(torch_rows), key=str)
        if missing or extra_rows:
            fail(f"{what}: rows differ: torch only {missing}, optrace only {extra_rows}")
        problems = []
        for k, e in torch_rows.items():
            r = mine[k]
            if r["calls"] != e.count:
                problems.append(f"{k}: {r['calls']} calls, torch {e.count}")
            if abs(r["self_cpu_us"] - e.self_cpu_time_total) > max(0.01 * abs(e.self_cpu_time_total), 1.0):
                problems.append(f"{k}: self CPU {r['self_cpu_us']} us, torch {e.self_cpu_time_total} us")
            if profile_memory and (r["cpu_memory"], r["self_cpu_memory"]) != (e.cpu_memory_usage, e.self_cpu_memory_usage):
                problems.append(f"{k}: CPU memory {r['cpu_memory']}/{r['self_cpu_memory']}, "
                                f"torch {e.cpu_memory_usage}/{e.self_cpu_memory_usage}")
        if problems:
            fail(f"{what}: rows differ:\n  " + "\n  ".join(problems))

        table = theirs.table(sort_by="self_cpu_time_total", row_limit=-1)
        text = optrace(cli, trace, *extra)
        head = f"trace: {trace}\n"
        if not text.startswith(head) or text[len(head):] != table:
            print("--- torch:\n" + table + "--- optrace:\n" + text + "---")
            fail(f"{what}: the tables differ")
        print(f"{what}: {len(ours)} rows, {sum(r['calls'] for r in ours)} calls: the same rows and table as torch's")


def main(cli, work):
    os.makedirs(work, exist_ok=True)
    check(cli, work, profile_memory=False)
    check(cli, work, profile_memory=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
