// detail/common/counts.hpp: adding call counts read from files, which may be hostile
#pragma once
// A file may hold any count up to 2^63-1; two such counts overflow. Every total optrace prints or
// writes is either checked here or a sum of counts below a checked total (and so cannot
// overflow): an observation file's history is checked against its own total, and the totals of
// several files are added here.

#include <cstdint>
#include <string_view>

namespace optrace::detail {

inline constexpr std::string_view kCallsOverflow = "call counts add up past 2^63-1 (9223372036854775807)";

/// Adds `n` to `total`: false, and `total` unchanged, when the sum would overflow.
inline bool add_calls(int64_t& total, int64_t n) {
  int64_t sum = 0;
  if (__builtin_add_overflow(total, n, &sum)) return false;
  total = sum;
  return true;
}

}  // namespace optrace::detail
