// optrace/detail/common/compat.hpp: the differences between the libtorch versions optrace supports
#pragma once
// Every #if on a libtorch version lives here, so the rest of the code reads the same on
// libtorch 1.13 (Debian bookworm) and 2.x (Debian trixie, PyTorch's archives).

#include <ATen/ATen.h>
#include <ATen/core/operator_name.h>
#include <c10/util/Optional.h>
#include <torch/version.h>

#include <optional>
#include <type_traits>

#define OPTRACE_TORCH_VERSION (TORCH_VERSION_MAJOR * 10000 + TORCH_VERSION_MINOR * 100 + TORCH_VERSION_PATCH)
// AOTInductor's package loader from C++ (torch::inductor::AOTIModelPackageLoader): aoti.hpp, serve.hpp.
#define OPTRACE_HAS_AOTI (OPTRACE_TORCH_VERSION >= 20600)

namespace optrace::detail {

// libtorch 2.4+ made c10::optional an alias of std::optional; before, it was its own type.
inline constexpr bool kOptionalIsStd = std::is_same_v<c10::optional<int>, std::optional<int>>;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
#if OPTRACE_TORCH_VERSION < 20400
template <class T>
struct is_optional<c10::optional<T>> : std::true_type {};
#endif

}  // namespace optrace::detail

namespace optrace::detail {

// dtypes that only newer libtorch versions have. Code elsewhere names them through this enum
// and compares against `newer_dtype(...)`, which is nullopt where the installed libtorch lacks
// the dtype, so no other file needs an #if for them.
enum class NewerDtype {
  Float8_e5m2,      // libtorch 2.1
  Float8_e4m3fn,    // libtorch 2.1
  Float8_e5m2fnuz,  // libtorch 2.2
  Float8_e4m3fnuz,  // libtorch 2.2
  UInt16,           // libtorch 2.3
  UInt32,           // libtorch 2.3
  UInt64,           // libtorch 2.3
};

inline std::optional<c10::ScalarType> newer_dtype(NewerDtype which) {
  switch (which) {
#if OPTRACE_TORCH_VERSION >= 20100
    case NewerDtype::Float8_e5m2: return c10::ScalarType::Float8_e5m2;
    case NewerDtype::Float8_e4m3fn: return c10::ScalarType::Float8_e4m3fn;
#endif
#if OPTRACE_TORCH_VERSION >= 20200
    case NewerDtype::Float8_e5m2fnuz: return c10::ScalarType::Float8_e5m2fnuz;
    case NewerDtype::Float8_e4m3fnuz: return c10::ScalarType::Float8_e4m3fnuz;
#endif
#if OPTRACE_TORCH_VERSION >= 20300
    case NewerDtype::UInt16: return c10::ScalarType::UInt16;
    case NewerDtype::UInt32: return c10::ScalarType::UInt32;
    case NewerDtype::UInt64: return c10::ScalarType::UInt64;
#endif
    default: return std::nullopt;
  }
}

inline bool is_newer_dtype(c10::ScalarType dtype, NewerDtype which) {
  auto d = newer_dtype(which);
  return d && *d == dtype;
}

/// True for the float8 dtypes (none before libtorch 2.1).
inline bool is_float8(c10::ScalarType dtype) {
  return is_newer_dtype(dtype, NewerDtype::Float8_e5m2) || is_newer_dtype(dtype, NewerDtype::Float8_e4m3fn) ||
         is_newer_dtype(dtype, NewerDtype::Float8_e5m2fnuz) || is_newer_dtype(dtype, NewerDtype::Float8_e4m3fnuz);
}

/// True for uint16/uint32/uint64 (libtorch 2.3+), whose kernels are few ("barebones").
inline bool is_wide_unsigned(c10::ScalarType dtype) {
  return is_newer_dtype(dtype, NewerDtype::UInt16) || is_newer_dtype(dtype, NewerDtype::UInt32) ||
         is_newer_dtype(dtype, NewerDtype::UInt64);
}

}  // namespace optrace::detail

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace optrace::detail {

// Composite kernels that branch on isTensorSubclassLike only from libtorch 2.0 (reshape's
// `_reshape_alias` / `view`, the attention math's `add_` / `add`, ...): the context rules marked
// since_2_0 in dispatcher.hpp. Read in the sources of 1.13 and 2.6; 2.0 is where the Python
// dispatch mode started to make every tensor subclass-like for reshape.
inline constexpr bool kTorch2Branches = OPTRACE_TORCH_VERSION >= 20000;

// Device-side timing with libtorch's device-generic events: `c10::Event::elapsedTime` and
// `synchronize` exist for CUDA from libtorch 2.4 (generic events, pytorch#125757); 2.5 is
// required here to stay clear of the first release. Older versions time on the host around a
// device synchronization instead (the caller's fallback).
inline constexpr bool kHasEventTiming = OPTRACE_TORCH_VERSION >= 20500;

// Milliseconds between two events recorded on `device`'s current stream around `fn()`. Only
// called when kHasEventTiming; elsewhere it runs `fn` and returns a negative number.
template <class Fn>
double event_time_ms(c10::Device device, Fn&& fn) {
#if OPTRACE_TORCH_VERSION >= 20500
  c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream stream = impl.getStream(device);
  c10::Event start(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  c10::Event end(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  start.record(stream);
  fn();
  end.record(stream);
  end.synchronize();
  return start.elapsedTime(end);
#else
  (void)device;
  fn();
  return -1.0;
#endif
}

}  // namespace optrace::detail
