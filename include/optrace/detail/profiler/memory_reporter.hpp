// optrace/detail/profiler/memory_reporter.hpp: profile_memory's reporter, which c10's allocators call
#pragma once
// c10's allocators report each allocation and free to the thread's PROFILER_STATE debug info (a
// c10::MemoryReportingInfoBase); the Profiler installs one on the stepping thread, and libtorch's
// thread pools carry it into the threads they run the op's work on. Each report is appended to
// the reporting thread's buffer of the open window, as the callbacks append events.

#include <optrace/detail/profiler/callbacks.hpp>
#include <optrace/detail/profiler/window.hpp>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace optrace::detail::profiler {

// The type of the totals reportMemoryUsage receives, read from its declaration.
template <class T>
struct TotalsOf;
template <class C, class Total>
struct TotalsOf<void (C::*)(void*, int64_t, Total, Total, c10::Device)> {
  using type = Total;  // int64_t in libtorch 1.13, size_t in 2.x
};
using MemoryTotal = TotalsOf<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::type;

// The memory reporter c10's allocators call on the threads that carry it.
struct MemoryReporter : c10::MemoryReportingInfoBase {
  // Read by every thread that carries the reporter (libtorch's pools), cleared by the stepping
  // thread when the window closes.
  std::atomic<bool> enabled{false};

  void reportMemoryUsage(void* ptr, int64_t alloc_size, MemoryTotal total_allocated, MemoryTotal total_reserved,
                         c10::Device device) override {
    if (!enabled.load(std::memory_order_relaxed)) return;
    ThreadState& ts = thread_state();
    ThreadBuffer* b = ts.current();
    if (b == nullptr) return;
    MemoryEvent m;
    m.ts_ns = now_ns();
    m.addr = reinterpret_cast<uintptr_t>(ptr);
    m.bytes = alloc_size;
    m.total_allocated = static_cast<int64_t>(total_allocated);
    m.total_reserved = static_cast<int64_t>(total_reserved);
    m.device_type = static_cast<int8_t>(device.type());
    m.device_index = static_cast<int8_t>(device.index());
    std::lock_guard<op_tracer::SpinLock> lock(b->mutex);
    if (ts.window->closed.load(std::memory_order_relaxed)) return;
    b->memory.push_back(m);
  }
  bool memoryProfilingEnabled() const override { return enabled.load(std::memory_order_relaxed); }
};

}  // namespace optrace::detail::profiler
