# torch.profiler.schedule's action for each step, for tests/test_profiler.cpp to compare with
# optrace::Schedule: one line per schedule, the actions' names separated by spaces.
# usage: python3 profiler_schedule.py STEPS [WAIT WARMUP ACTIVE REPEAT SKIP_FIRST]...
import sys
import warnings

from torch.profiler import schedule

warnings.simplefilter("ignore")  # "won't be using warmup": the output is only the actions

steps = int(sys.argv[1])
values = [int(v) for v in sys.argv[2:]]
for i in range(0, len(values), 5):
    wait, warmup, active, repeat, skip_first = values[i:i + 5]
    fn = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    print(" ".join(fn(step).name for step in range(steps)))
