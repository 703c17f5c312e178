"""Writes tests/data/kineto/torch26_scripted.*: a trace torch 2.6's profiler wrote, and the tables
torch's key_averages() printed for it in the same run (test_key_averages.cpp compares optrace's
tables of the file with them).

Usage (torch 2.6, e.g. in the trixie chroot:
bash .ci/trixie.sh --run 'python3 tests/python/key_averages_golden.py tests/data/kineto/torch26_scripted'):
    key_averages_golden.py OUT_PREFIX

Writes OUT_PREFIX.pt.trace.json.gz and OUT_PREFIX.tables.txt, each table after a line
`== key_averages(group_by_input_shape=G).table(sort_by="S", row_limit=N)`. The run is
key_averages_parity.py's, with profile_memory.
"""
import gzip
import os
import sys
import tempfile

from key_averages_parity import profile_scripted

TABLES = [(False, "self_cpu_time_total", -1), (True, "cpu_time_total", 8), (False, "self_cpu_memory_usage", 5),
          (False, "cpu_memory_usage", 5), (False, "count", 5), (False, "cpu_time", 5)]


def main(out):
    prof = profile_scripted(profile_memory=True)
    with tempfile.TemporaryDirectory() as work:
        trace = os.path.join(work, "trace.json")
        prof.export_chrome_trace(trace)
        with open(trace, "rb") as f, gzip.open(out + ".pt.trace.json.gz", "wb") as g:
            g.write(f.read())
    with open(out + ".tables.txt", "w") as f:
        for grouped, sort_by, limit in TABLES:
            f.write(f'== key_averages(group_by_input_shape={grouped}).table(sort_by="{sort_by}", row_limit={limit})\n')
            f.write(prof.key_averages(group_by_input_shape=grouped).table(sort_by=sort_by, row_limit=limit))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
