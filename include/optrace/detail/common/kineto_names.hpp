// optrace/detail/common/kineto_names.hpp: the "cat" names of a Kineto trace's events, in one table
#pragma once
// libkineto writes an activity's "cat" as its ActivityType's name (the `map` of
// libkineto/src/ActivityType.cpp), and torch.profiler reads them back by those names. Every
// reader and writer of Kineto traces here (import, export, the Profiler's writer, key_averages)
// takes them from this table, as libkineto keeps its own: one constexpr array in the enum's
// order, checked at compile time. The ActivityType *numbers* are not kept here: they moved
// between libkineto versions (8 was CPU_INSTANT_EVENT before kineto 09942dbb, 2023, CUDA_DRIVER
// after), so the code that reads them (profiler/device_trace.hpp) compares them with the enum of
// the libkineto it is compiled against.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace optrace::detail::kineto_names {

/// The categories optrace reads or writes, in libkineto's ActivityType order for those it has,
/// then the names that are no ActivityType of today's: older traces' names for ops, runtime calls
/// and kernels, and the span of the whole trace.
enum class Category : unsigned char {
  cpu_op,
  user_annotation,
  gpu_user_annotation,
  gpu_memcpy,
  gpu_memset,
  kernel,  // CONCURRENT_KERNEL
  cuda_runtime,
  cuda_driver,
  cpu_instant_event,
  python_function,
  overhead,
  mtia_runtime,
  cuda_sync,
  xpu_runtime,
  privateuse1_runtime,
  privateuse1_driver,
  operator_legacy,  // "Operator": cpu_op in older traces
  runtime_legacy,   // "Runtime": cuda_runtime in older traces
  kernel_legacy,    // "Kernel": kernel in older traces
  trace_span,       // "Trace": the span of the whole trace
  count
};

struct CategoryName {
  Category category;
  std::string_view name;
};

inline constexpr std::array<CategoryName, static_cast<size_t>(Category::count)> kCategories{{
    {Category::cpu_op, "cpu_op"},
    {Category::user_annotation, "user_annotation"},
    {Category::gpu_user_annotation, "gpu_user_annotation"},
    {Category::gpu_memcpy, "gpu_memcpy"},
    {Category::gpu_memset, "gpu_memset"},
    {Category::kernel, "kernel"},
    {Category::cuda_runtime, "cuda_runtime"},
    {Category::cuda_driver, "cuda_driver"},
    {Category::cpu_instant_event, "cpu_instant_event"},
    {Category::python_function, "python_function"},
    {Category::overhead, "overhead"},
    {Category::mtia_runtime, "mtia_runtime"},
    {Category::cuda_sync, "cuda_sync"},
    {Category::xpu_runtime, "xpu_runtime"},
    {Category::privateuse1_runtime, "privateuse1_runtime"},
    {Category::privateuse1_driver, "privateuse1_driver"},
    {Category::operator_legacy, "Operator"},
    {Category::runtime_legacy, "Runtime"},
    {Category::kernel_legacy, "Kernel"},
    {Category::trace_span, "Trace"},
}};

constexpr bool in_enum_order() {
  for (size_t k = 0; k < kCategories.size(); ++k)
    if (static_cast<size_t>(kCategories[k].category) != k || kCategories[k].name.empty()) return false;
  return true;
}
static_assert(in_enum_order(), "kCategories lists every Category once, in the enum's order");

/// The name a trace gives category `c`: `name(Category::kernel)` is "kernel".
constexpr std::string_view name(Category c) { return kCategories[static_cast<size_t>(c)].name; }

/// Whether `cat` (an event's "cat") names category `c`.
constexpr bool is(std::string_view cat, Category c) { return cat == name(c); }

/// Whether `cat` is a host runtime or driver call's (cudaLaunchKernel, cuLaunchKernel, ...): the
/// calls that launch device work, whose "correlation" the device events they launched repeat.
constexpr bool is_runtime(std::string_view cat) {
  for (Category c : {Category::cuda_runtime, Category::cuda_driver, Category::xpu_runtime, Category::mtia_runtime,
                     Category::privateuse1_runtime, Category::privateuse1_driver, Category::runtime_legacy})
    if (is(cat, c)) return true;
  return false;
}

/// Whether `cat` is a device kernel's ("kernel", older traces' "Kernel").
constexpr bool is_kernel(std::string_view cat) { return is(cat, Category::kernel) || is(cat, Category::kernel_legacy); }

/// Whether a collective call's name (`gloo:send`, `c10d::recv_`, `nccl:recv`) is of a
/// point-to-point op: send, recv, recv_any_source. c10d numbers those apart from a group's
/// collectives (NCCL in a sequence of their own, gloo in none): one rule for the Profiler, which
/// writes no sequence number on them, and for matching, which keeps them apart.
constexpr bool is_point_to_point(std::string_view name) {
  return name.find("send") != std::string_view::npos || name.find("recv") != std::string_view::npos;
}

}  // namespace optrace::detail::kineto_names
