// optrace/detail/compat.hpp: the differences between the libtorch versions optrace supports
#pragma once
// Every #if on a libtorch version lives here, so the rest of the code reads the same on
// libtorch 1.13 (Debian bookworm) and 2.x (Debian trixie, PyTorch's archives).

#include <ATen/ATen.h>
#include <c10/util/Optional.h>
#include <torch/version.h>

#include <optional>
#include <type_traits>

#define OPTRACE_TORCH_VERSION (TORCH_VERSION_MAJOR * 10000 + TORCH_VERSION_MINOR * 100 + TORCH_VERSION_PATCH)

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
