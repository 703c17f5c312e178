// optrace/detail/profiler/device_trace.hpp: CUDA kernels, copies and runtime calls, from libtorch's own Kineto
#pragma once
// Why libtorch's Kineto: CUPTI's activity records (kernels with their stream and device times,
// the runtime calls that launched them, and the correlation id that pairs the two) are what
// torch.profiler's CUDA rows are made of, and libtorch >= 2.0 built with Kineto exposes them in
// C++ (torch/csrc/autograd/profiler_kineto.h). The Profiler runs it for the CUDA activity only:
// the CPU side stays optrace's own recording (one set of RecordFunction callbacks, the same on
// every libtorch), and the two are joined when the trace is written:
// a runtime call takes the "External id" of the range around it, a kernel, copy or set its
// call's through the correlation id, and an "ac2g" flow goes from the call to it, as torch
// writes them (join_device_events below says how the range is found).
// Kineto's device times are converted to the recording's steady clock (see to_steady_offset).
// What KinetoEvent does not hold (launch configurations, bytes, cbid, deviceProperties) is read
// from the trace libtorch saves of the same recording when the trace is first written
// (device_details.hpp).
//
// Where libtorch is older than 2.0, or built without Kineto (Debian's 1.13), or no CUDA device is
// present, nothing here runs and the Profiler says so in notes().

#include <optrace/detail/common/compat.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/profiler/device_details.hpp>
#include <optrace/detail/profiler/window.hpp>

#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#if OPTRACE_TORCH_VERSION >= 20000
#include <torch/csrc/autograd/profiler_kineto.h>
#define OPTRACE_PROFILER_DEVICE_TRACE 1
// libkineto's ActivityType enum, where its headers are installed beside libtorch's (Debian's
// libtorch-dev puts them in /usr/include/kineto/; they are on no include path of Torch's own).
#if __has_include(<kineto/ActivityType.h>)
#include <kineto/ActivityType.h>
#define OPTRACE_KINETO_ACTIVITY_TYPES 1
#endif
#else
#define OPTRACE_PROFILER_DEVICE_TRACE 0
#endif
#ifndef OPTRACE_KINETO_ACTIVITY_TYPES
#define OPTRACE_KINETO_ACTIVITY_TYPES 0
#endif

#include <unistd.h>

namespace optrace::detail::profiler {

#if OPTRACE_KINETO_ACTIVITY_TYPES
// Whether this libkineto has CUDA_DRIVER (kineto 09942dbb, 2023, put it where CPU_INSTANT_EVENT was).
template <class A, class = void>
struct has_cuda_driver : std::false_type {};
template <class A>
struct has_cuda_driver<A, std::void_t<decltype(A::CUDA_DRIVER)>> : std::true_type {};

// The kind of a KinetoEvent's activityType(), a libkineto::ActivityType: compared with the enum of
// the libkineto this libtorch ships, never with numbers, which moved between libkineto versions
// (8: CPU_INSTANT_EVENT, then CUDA_DRIVER).
template <class ActivityType = libkineto::ActivityType>
bool device_kind_of(uint8_t activity_type, DeviceKind& kind) {
  auto is = [activity_type](ActivityType t) { return activity_type == static_cast<uint8_t>(t); };
  if (is(ActivityType::GPU_MEMCPY)) return kind = DeviceKind::kMemcpy, true;
  if (is(ActivityType::GPU_MEMSET)) return kind = DeviceKind::kMemset, true;
  if (is(ActivityType::CONCURRENT_KERNEL)) return kind = DeviceKind::kKernel, true;
  if (is(ActivityType::CUDA_RUNTIME)) return kind = DeviceKind::kRuntime, true;
  if constexpr (has_cuda_driver<ActivityType>::value)
    if (is(ActivityType::CUDA_DRIVER)) return kind = DeviceKind::kDriver, true;
  return false;
}
#else
// Without libkineto's header: its ActivityType numbers since kineto 09942dbb (2023; before it, 8
// was CPU_INSTANT_EVENT). The ones below 8 have kept their place since Kineto's first release.
inline bool device_kind_of(uint8_t activity_type, DeviceKind& kind) {
  switch (activity_type) {
    case 3: kind = DeviceKind::kMemcpy; return true;   // GPU_MEMCPY
    case 4: kind = DeviceKind::kMemset; return true;   // GPU_MEMSET
    case 5: kind = DeviceKind::kKernel; return true;   // CONCURRENT_KERNEL
    case 7: kind = DeviceKind::kRuntime; return true;  // CUDA_RUNTIME
    case 8: kind = DeviceKind::kDriver; return true;   // CUDA_DRIVER
    default: return false;
  }
}
#endif

// Kineto's timestamps are Unix-epoch nanoseconds where libtorch converts CUPTI's clock (CUDA
// builds), a monotonic clock elsewhere (ROCm traces show uptime): each window's events are
// taken as whichever of the two their first timestamp is near.
inline int64_t to_steady_offset(int64_t first_ns, int64_t steady_to_epoch) {
  const int64_t now = now_ns();
  const int64_t as_epoch = std::llabs(first_ns - (now + steady_to_epoch));
  const int64_t as_steady = std::llabs(first_ns - now);
  return as_epoch < as_steady ? -steady_to_epoch : 0;
}

#if OPTRACE_PROFILER_DEVICE_TRACE
// Has libtorch save `result`'s trace to a temporary file (removed after) and gives `w`'s device
// events and metadata what it holds beyond KinetoEvent (device_details.hpp). Returns why not, or
// "" when done.
inline std::string save_device_details(torch::autograd::profiler::ProfilerResult& result, Window& w) {
  static std::atomic<uint64_t> saved{0};
  std::string path, error;
  try {
    path = (std::filesystem::temp_directory_path() /
            ("optrace-cuda-" + std::to_string(::getpid()) + "-" + std::to_string(saved++) + ".pt.trace.json"))
               .string();
    result.save(path);
    DeviceDetails details = read_device_details_file(path);
    attach_device_details(w.device_events, details);
    w.device_metadata = std::move(details.metadata);
  } catch (const std::exception& e) {
    error = first_line(e);
  }
  std::error_code ignored;
  if (!path.empty()) std::filesystem::remove(path, ignored);
  return error;
}
#endif

// What a window leaves on the thread that opened it when it closes on another: libtorch's profiler
// state (the CUDA activity: CUPTI records until it is popped) and the Profiler's memory reporter
// above it, disabled. Only that thread can pop them: libtorch's disableProfiler pops the calling
// thread's state, and another thread's pop would take whatever that thread holds (its own
// profiler's state) or throw.
struct OpeningThreadState {
  std::thread::id thread;
  std::shared_ptr<c10::DebugInfoBase> reporter;  // popped if still the top of the thread's PROFILER_STATE
  const c10::DebugInfoBase* device = nullptr;    // libtorch's state, known by address

  bool empty() const { return !reporter && device == nullptr; }

  // On `thread`: pops what is still ours, the top first, and nothing else (a state the job pushed
  // above ours stays, and so does ours beneath it); true when done. Elsewhere: false.
  bool release() noexcept {
    if (std::this_thread::get_id() != thread) return false;
    constexpr auto kind = c10::DebugInfoKind::PROFILER_STATE;
    try {
      if (reporter && c10::ThreadLocalDebugInfo::get(kind) == reporter.get()) c10::ThreadLocalDebugInfo::_pop(kind);
#if OPTRACE_PROFILER_DEVICE_TRACE
      if (device != nullptr && c10::ThreadLocalDebugInfo::get(kind) == device)
        (void)torch::autograd::profiler::disableProfiler();
#endif
    } catch (...) {  // not ours on top after all: left as it is
    }
    reporter.reset();
    device = nullptr;
    return true;
  }
};

// Runs libtorch's Kineto profiler for the CUDA activity over one recording window, on the thread
// that opens the window.
class DeviceCapture {
 public:
  // Starts CUPTI's recording; false (and why in `note`) where it cannot.
  bool start(std::string& note) {
#if OPTRACE_PROFILER_DEVICE_TRACE
    namespace impl = torch::profiler::impl;
    try {
      impl::ProfilerConfig config(impl::ProfilerState::KINETO);
      const std::set<impl::ActivityType> activities{impl::ActivityType::CUDA};
      torch::autograd::profiler::prepareProfiler(config, activities);
      torch::autograd::profiler::enableProfiler(config, activities);
      state_ = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE);
      running_ = true;
      return true;
    } catch (const std::exception& e) {
      note = std::string("CUDA activity: libtorch's Kineto profiler could not start (") + first_line(e) +
             "): kernels are not recorded; CPU ops that launch them are";
      return false;
    }
#else
    note = "CUDA activity: kernels and runtime calls need libtorch >= 2.0 built with Kineto (this is " +
           std::string(TORCH_VERSION) + "); CPU ops that launch them are recorded";
    return false;
#endif
  }

  // Stops it and gives `window` what CUPTI recorded, on the steady clock, and the reading of the
  // rest (read_device_details: the first writer of the trace runs it). Call on the starting
  // thread (left() elsewhere). libtorch's failures are caught: returns why the CUDA events are
  // missing, or "".
  std::string stop(int64_t steady_to_epoch, Window& window) {
    std::vector<DeviceEvent>& out = window.device_events;
    out.clear();
#if OPTRACE_PROFILER_DEVICE_TRACE
    if (!running_) return {};
    running_ = false;
    state_ = nullptr;
    try {
      std::shared_ptr<torch::autograd::profiler::ProfilerResult> result = torch::autograd::profiler::disableProfiler();
      if (!result) return {};
      bool offset_known = false;
      int64_t offset = 0;
      for (const auto& e : result->events()) {
        DeviceEvent d;
        if (!device_kind_of(e.activityType(), d.kind)) continue;
        const auto start = static_cast<int64_t>(e.startNs());
        if (!offset_known) {
          offset = to_steady_offset(start, steady_to_epoch);
          offset_known = true;
        }
        d.name = e.name();
        d.start_ns = start + offset;
        d.dur_ns = static_cast<int64_t>(e.durationNs());
        d.correlation = e.correlationId();
        if (on_host(d.kind)) {
          d.stream = static_cast<int64_t>(e.startThreadId());
        } else {
          d.device = e.deviceIndex();
          d.stream = e.deviceResourceId();
        }
        out.push_back(std::move(d));
      }
      std::sort(out.begin(), out.end(), [](const DeviceEvent& a, const DeviceEvent& b) { return a.start_ns < b.start_ns; });
      if (!out.empty())
        window.read_device_details = [result](Window& w) {
          const std::string error = save_device_details(*result, w);
          if (!error.empty())
            std::cerr << "optrace: Profiler: the CUDA events are written without what libtorch's saved trace adds "
                         "(launch configurations, bytes, cbid, deviceProperties): "
                      << error << "\n";
        };
    } catch (const std::exception& e) {
      out.clear();
      return std::string("CUDA activity: libtorch's Kineto profiler did not stop (") + first_line(e) +
             "): this window has no kernels";
    } catch (...) {
      out.clear();
      return "CUDA activity: libtorch's Kineto profiler did not stop: this window has no kernels";
    }
#else
    (void)steady_to_epoch;
#endif
    return {};
  }

  // Gives up a capture running on another thread (the window closes elsewhere): no CUDA event is
  // taken, and libtorch's state stays on its thread until OpeningThreadState::release() there.
  const c10::DebugInfoBase* left() noexcept {
    running_ = false;
    const c10::DebugInfoBase* s = state_;
    state_ = nullptr;
    return s;
  }

  bool running() const { return running_; }

 private:
  bool running_ = false;
  const c10::DebugInfoBase* state_ = nullptr;  // libtorch's, on the starting thread
};

// The innermost recorded range of thread buffer `b` that encloses [start, end], or -1. Events
// are in start order within a buffer, and ranges nest: the innermost enclosing one is the last
// one started before `start`, or one of its enclosing ranges.
inline int32_t enclosing_event(const ThreadBuffer& b, int64_t start, int64_t end) {
  // The last event that starts at or before `start`, then out through its parents.
  auto after = std::upper_bound(b.events.begin(), b.events.end(), start,
                                [](int64_t t, const Event& e) { return t < e.start_ns; });
  auto k = static_cast<int32_t>(after - b.events.begin()) - 1;
  while (k >= 0) {
    const Event& e = b.events[static_cast<size_t>(k)];
    if (e.end_ns >= end) return k;
    k = e.parent;
  }
  return -1;
}

// How a window's CUDA activity joins its ranges, as torch's correlation gives it: computed once
// here for the trace (kineto_writer.hpp) and for key_averages (timed_events.hpp), so that the two
// tell the same story.
// - Each range that ended has an External id: 1, 2, ... buffer by buffer, in the order the trace
//   writes them (0 for one still open when the window closed).
// - A runtime call belongs to the shortest range that encloses it on any thread (the innermost of
//   the launching thread, unless two threads launch at once): libtorch gives an unlinked call the
//   thread that stopped the profiler, not the one that made it. It takes that range's External id
//   and thread; in no range, none (0) and the thread that collected it (the profiler's).
// - A kernel, copy or set takes its runtime call's External id through the correlation id; none
//   when the call is not in the window.
struct DeviceJoin {
  std::vector<std::vector<int64_t>> external_id;  // [buffer][event]
  int64_t numbered = 0;                            // the last External id given (1 ... numbered)
  struct Link {
    int64_t external = 0;  // the External id of the range it belongs to; 0: none
    int64_t tid = 0;       // a runtime call's thread (os id), as the trace writes it
    int64_t call = -1;     // a device event's runtime call: its index in device_events; -1: none
  };
  std::vector<Link> links;  // [device event], in device_events' order
};

inline DeviceJoin join_device_events(const Window& window) {
  DeviceJoin join;
  int64_t next = 0;
  join.external_id.reserve(window.buffers.size());
  for (const auto& b : window.buffers) {
    std::vector<int64_t>& ids = join.external_id.emplace_back(b->events.size(), 0);
    for (size_t k = 0; k < b->events.size(); ++k)
      if (b->events[k].end_ns >= 0) ids[k] = ++next;
  }
  join.numbered = next;
  const std::vector<DeviceEvent>& events = window.device_events;
  join.links.resize(events.size());
  std::unordered_map<uint64_t, int64_t> call_of;  // correlation -> the runtime call's index
  for (size_t i = 0; i < events.size(); ++i) {
    const DeviceEvent& d = events[i];
    if (!on_host(d.kind)) continue;
    DeviceJoin::Link& link = join.links[i];
    link.tid = d.stream;
    link.call = static_cast<int64_t>(i);
    int64_t shortest = -1;
    for (size_t bi = 0; bi < window.buffers.size(); ++bi) {
      const ThreadBuffer& b = *window.buffers[bi];
      if (b.rf_thread_id == static_cast<uint64_t>(d.stream) && shortest < 0) link.tid = b.os_tid;
      const int32_t k = enclosing_event(b, d.start_ns, d.start_ns + d.dur_ns);
      if (k < 0) continue;
      const Event& e = b.events[static_cast<size_t>(k)];
      if (shortest >= 0 && e.end_ns - e.start_ns >= shortest) continue;
      shortest = e.end_ns - e.start_ns;
      link.external = join.external_id[bi][static_cast<size_t>(k)];
      link.tid = b.os_tid;
    }
    call_of.emplace(d.correlation, static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (on_host(events[i].kind)) continue;
    auto it = call_of.find(events[i].correlation);
    if (it == call_of.end()) continue;
    join.links[i].call = it->second;
    join.links[i].external = join.links[static_cast<size_t>(it->second)].external;
  }
  return join;
}

}  // namespace optrace::detail::profiler
