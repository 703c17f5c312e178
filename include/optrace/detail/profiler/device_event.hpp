// optrace/detail/profiler/device_event.hpp: a CUDA activity as a window holds it, and torch's category of each kind
#pragma once

#include <optrace/detail/common/kineto_names.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace optrace::detail::profiler {

// The categories torch.profiler writes device-side and runtime events under.
enum class DeviceKind : uint8_t { kKernel, kMemcpy, kMemset, kRuntime, kDriver };

// The category torch.profiler writes an activity of kind `k` under.
inline std::string_view device_category(DeviceKind k) {
  using kineto_names::Category;
  switch (k) {
    case DeviceKind::kKernel: return kineto_names::name(Category::kernel);
    case DeviceKind::kMemcpy: return kineto_names::name(Category::gpu_memcpy);
    case DeviceKind::kMemset: return kineto_names::name(Category::gpu_memset);
    case DeviceKind::kRuntime: return kineto_names::name(Category::cuda_runtime);
    case DeviceKind::kDriver: return kineto_names::name(Category::cuda_driver);
  }
  return kineto_names::name(Category::kernel);
}

// The kind whose category is `cat` (a trace's "cat"); false for any other category.
inline bool device_kind_of_category(std::string_view cat, DeviceKind& kind) {
  for (DeviceKind k : {DeviceKind::kKernel, DeviceKind::kMemcpy, DeviceKind::kMemset, DeviceKind::kRuntime,
                       DeviceKind::kDriver})
    if (cat == device_category(k)) return kind = k, true;
  return false;
}

inline bool on_host(DeviceKind k) { return k == DeviceKind::kRuntime || k == DeviceKind::kDriver; }

// One activity CUPTI reported (device_trace.hpp). Times are the recording's steady clock.
struct DeviceEvent {
  std::string name;
  DeviceKind kind = DeviceKind::kKernel;
  int64_t start_ns = 0, dur_ns = 0;
  uint64_t correlation = 0;
  int64_t device = 0;  // device side: the device index
  int64_t stream = 0;  // device side: the stream; on the host: the thread (os id)
  // What CUPTI adds (a kernel's launch configuration, a copy's bytes, a call's cbid): JSON
  // members from libtorch's saved trace (device_details.hpp); empty until read.
  std::string args;
};

}  // namespace optrace::detail::profiler
