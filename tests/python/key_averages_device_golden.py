"""torch's own tables of the hand-made device events of tests/test_key_averages.cpp.

The test's expected texts for gpu_step() and the merged-call events ("kernels count toward the op
that launched them", "a merged call's kernels replace the outer call's") are what this prints:
torch's FunctionEvents of the same events, joined as torch's `_parse_kineto_results` joins them
(the loop below is its own), then `key_averages().table(...)`. Run with torch 2.6 or later:

    bash .ci/trixie.sh --run 'python3 tests/python/key_averages_device_golden.py'
"""
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent, _rewrite_name


def events_of(spec, memory=()):
    """spec: (name, thread, start_us, end_us, on_device, correlation id, linked id, user annotation,
    input shapes); memory: (time_us, bytes, device type). Returns the tree-built EventList."""
    events, linked_to, frontend = [], {}, []
    for name, thread, start, end, on_device, id_, linked, annotation, shapes in spec:
        cpu_memory = device_memory = 0
        if not on_device:
            for t, nbytes, device_type in memory:
                if start <= t <= end:
                    cpu_memory += nbytes if device_type in (0, 2, 5) else 0
                    device_memory += nbytes if device_type in (1, 6, 20) else 0
        fe = FunctionEvent(id=id_, name=_rewrite_name(name, with_wildcard=True), thread=thread, start_us=start,
                           end_us=end, input_shapes=shapes, stack=[], use_device="cuda",
                           cpu_memory_usage=cpu_memory, device_memory_usage=device_memory,
                           device_type=DeviceType.CUDA if on_device else DeviceType.CPU,
                           is_user_annotation=annotation)
        events.append(fe)
        (linked_to.setdefault(linked, []) if linked > 0 else frontend).append(fe)
    # torch/autograd/profiler.py, _parse_kineto_results: device events to the CPU events linked to none.
    for fe in frontend:
        if fe.device_type == DeviceType.CPU and not fe.is_async and fe.id in linked_to:
            for f_evt in linked_to[fe.id]:
                if f_evt.device_type == DeviceType.CUDA:
                    fe.append_kernel(f_evt.name, f_evt.device_index, f_evt.time_range.end - f_evt.time_range.start)
                elif f_evt.device_type == DeviceType.CPU:
                    f_evt.thread = fe.thread
    events.sort(key=lambda evt: [evt.time_range.start, -evt.time_range.end])
    out = EventList(events, use_device="cuda", profile_memory=bool(memory))
    out._build_tree()
    return out


# gpu_step() of the test.
gpu_step = events_of([
    ("aten::linear", 1, 0, 100, False, 1, 0, False, []),
    ("aten::addmm", 1, 10, 90, False, 2, 0, False, []),
    ("cudaLaunchKernel", 9, 20, 30, False, 501, 2, False, []),
    ("gemm", 7, 40, 50, True, 0, 2, False, []),
    ("gemm", 7, 60, 65, True, 0, 2, False, []),
    ("aten::relu", 1, 100, 120, False, 3, 0, False, []),
    ("cudaLaunchKernel", 1, 105, 110, False, 502, 3, False, []),
    ("relu_kernel", 7, 130, 132, True, 0, 3, False, []),
    ("step", 7, 39, 140, True, 0, 0, True, []),
    ("cudaDeviceSynchronize", 1, 150, 160, False, 3, 0, False, []),
])
print('== gpu_step: key_averages().table(sort_by="self_cuda_time_total", row_limit=-1)')
print(gpu_step.key_averages().table(sort_by="self_cuda_time_total", row_limit=-1), end="")

# The merged call's events, with memory (the free at 200 us lies in no event: a "[memory]" row).
merged = events_of([
    ("f", 1, 0, 50, False, 10, 0, False, [[2, 3]]),
    ("f", 1, 5, 45, False, 11, 0, False, [[2, 3]]),
    ("g", 1, 10, 20, False, 12, 0, False, [[4]]),
    ("k1", 7, 60, 61, True, 0, 10, False, []),
    ("k2", 7, 62, 65, True, 0, 11, False, []),
    ("k3", 7, 70, 74, True, 0, 12, False, []),
    ("[memory]", 1, 200, 200, False, 0, 0, False, []),
], memory=[(15, 1024, 1), (30, 2048, 1), (40, 100, 0), (200, -512, 1)])
print('== merged: key_averages().table(sort_by="self_cuda_memory_usage", row_limit=-1)')
print(merged.key_averages().table(sort_by="self_cuda_memory_usage", row_limit=-1), end="")
