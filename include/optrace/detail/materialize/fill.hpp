// optrace/detail/materialize/fill.hpp: storage extents, per-tensor seeds and dtype-aware in-place fills
#pragma once

#include <optrace/detail/common/compat.hpp>
#include <optrace/error.hpp>
#include <optrace/tensor_spec.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail {

// How a dtype is filled. Proxy kinds have no random kernels of their own (float8 has none,
// uint16/32/64 are "barebones" in libtorch 2.3+): they are drawn in a wider dtype on the same
// device, a bounded chunk at a time, and copied in.
enum class FillKind { floating, complex, integer, boolean, float8_proxy, unsigned_proxy };

// Elements per chunk of a proxy fill: bounds the temporary to 32 MiB (int64) on the device.
inline constexpr int64_t kProxyChunk = int64_t{1} << 22;

// splitmix64 (Steele, Lea, Flood 2014): a cheap bijective mix, so that stream i of seed s is
// unrelated to stream i + 1 and to seed s + 1, and a tensor's values depend only on (seed, i).
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t stream_seed(uint64_t seed, uint64_t stream) { return splitmix64(seed ^ splitmix64(stream)); }

// How error messages name a tensor: "tensor #3 (Float [2, 3])", or "tensor (Float [2, 3])"
// without a stream. Streamed into messages, so that the text is built only on failure.
struct Where {
  const TensorSpec& spec;
  std::optional<uint64_t> stream;
};

inline std::ostream& operator<<(std::ostream& out, const Where& w) {
  out << "tensor ";
  if (w.stream) out << "#" << *w.stream << " ";
  out << "(" << c10::toString(w.spec.dtype) << " [";
  for (size_t i = 0; i < w.spec.sizes.size(); ++i) out << (i ? ", " : "") << w.spec.sizes[i];
  return out << "])";
}

// "4294967296 bytes (4.0 GiB)"
inline std::string human_bytes(int64_t bytes) {
  std::ostringstream out;
  out << bytes << " bytes";
  out.setf(std::ios::fixed);
  out.precision(1);
  if (bytes >= (int64_t{1} << 30)) out << " (" << static_cast<double>(bytes) / (1 << 30) << " GiB)";
  else if (bytes >= (int64_t{1} << 20)) out << " (" << static_cast<double>(bytes) / (1 << 20) << " MiB)";
  return out.str();
}

// The strides a spec stands for: its own, or contiguous ones when it records none.
inline std::vector<int64_t> effective_strides(const TensorSpec& spec) {
  return spec.strides.empty() ? TensorSpec::contiguous_strides(spec.sizes) : spec.strides;
}

// Elements of storage that `spec` addresses: storage_offset + 1 + sum((size_i - 1) * stride_i),
// or storage_offset alone when the tensor has no elements. Throws ShapeError.
inline int64_t storage_elements(const TensorSpec& spec, const Where& where) {
  OPTRACE_CHECK(spec.strides.empty() || spec.strides.size() == spec.sizes.size(), ShapeError, where, ": ",
                spec.strides.size(), " strides for ", spec.sizes.size(), " sizes");
  OPTRACE_CHECK(spec.storage_offset >= 0, ShapeError, where, ": negative storage offset ", spec.storage_offset);
  const std::vector<int64_t> strides = effective_strides(spec);
  bool empty = false;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    OPTRACE_CHECK(spec.sizes[i] >= 0, ShapeError, where, ": negative size ", spec.sizes[i], " in dim ", i);
    OPTRACE_CHECK(strides[i] >= 0, ShapeError, where, ": negative stride ", strides[i], " in dim ", i,
                  " (libtorch tensors cannot have negative strides)");
    empty = empty || spec.sizes[i] == 0;
  }
  if (empty) return spec.storage_offset;
  int64_t extent = 1;
  bool overflow = false;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    int64_t span = 0;
    overflow = overflow || __builtin_mul_overflow(spec.sizes[i] - 1, strides[i], &span) ||
               __builtin_add_overflow(extent, span, &extent);
  }
  overflow = overflow || __builtin_add_overflow(extent, spec.storage_offset, &extent);
  OPTRACE_CHECK(!overflow, ShapeError, where, ": storage extent overflows int64");
  return extent;
}

// How `dtype` is filled; MaterializeError for one that cannot be.
inline FillKind fill_kind(c10::ScalarType dtype, const Where& where) {
  switch (dtype) {
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Float:
    case c10::ScalarType::Double: return FillKind::floating;
    case c10::ScalarType::ComplexHalf:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble: return FillKind::complex;
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long: return FillKind::integer;
    case c10::ScalarType::Bool: return FillKind::boolean;
    default: break;
  }
  if (is_float8(dtype)) return FillKind::float8_proxy;
  if (is_wide_unsigned(dtype)) return FillKind::unsigned_proxy;
  OPTRACE_CHECK(!c10::isQIntType(dtype), MaterializeError, where, ": quantized dtype ", c10::toString(dtype),
                " cannot be materialized (a TensorSpec records no scale or zero point)");
  raise<MaterializeError>(where, ": dtype ", c10::toString(dtype), " cannot be materialized (no fill for it)");
}

// The values [min, max] of an integer dtype, as int64 (uint64's top half is out of reach).
inline std::pair<int64_t, int64_t> integer_limits(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Byte: return {0, 255};
    case c10::ScalarType::Char: return {-128, 127};
    case c10::ScalarType::Short: return {-32768, 32767};
    case c10::ScalarType::Int: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: break;
  }
  if (is_newer_dtype(dtype, NewerDtype::UInt16)) return {0, 65535};
  if (is_newer_dtype(dtype, NewerDtype::UInt32)) return {0, std::numeric_limits<uint32_t>::max()};
  if (is_newer_dtype(dtype, NewerDtype::UInt64)) return {0, std::numeric_limits<int64_t>::max()};
  return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
}

// The half-open range a fill draws from for values observed in [min, max] (inclusive), both
// clamped to what `dtype` holds, so that a hand-edited file or a dtype changed since cannot ask
// for values out of reach. int64's largest value is left out: [low, max + 1) cannot say it.
inline std::pair<int64_t, int64_t> observed_fill_range(c10::ScalarType dtype, std::pair<int64_t, int64_t> observed) {
  const auto [lo, hi] = integer_limits(dtype);
  const int64_t high = std::clamp(observed.second, lo, hi);
  const int64_t low = std::clamp(observed.first, lo, high);
  if (high == std::numeric_limits<int64_t>::max()) return {std::min(low, high - 1), high};
  return {low, high + 1};
}

// What a fill needs from MaterializeOptions (kept apart so detail does not see the options).
struct FillParams {
  bool uniform = false;  // else normal
  double mean_or_low = 0, std_or_high = 1;  // normal: mean, std; uniform: low, high
  int64_t int_low = 0, int_high = 8;
  double bool_probability = 0.5;
};

inline void fill_floating(const at::Tensor& t, const FillParams& p, at::Generator& gen) {
  if (p.uniform) t.uniform_(p.mean_or_low, p.std_or_high, gen);
  else t.normal_(p.mean_or_low, p.std_or_high, gen);
}

// Fills a one-dimensional storage tensor in place. The generator is already seeded.
inline void fill_storage(const at::Tensor& flat, FillKind kind, const FillParams& p, at::Generator& gen) {
  if (flat.numel() == 0) return;
  switch (kind) {
    case FillKind::floating: fill_floating(flat, p, gen); return;
    case FillKind::complex: fill_floating(at::view_as_real(flat), p, gen); return;
    case FillKind::integer: flat.random_(p.int_low, p.int_high, gen); return;
    case FillKind::boolean: flat.bernoulli_(p.bool_probability, gen); return;
    case FillKind::float8_proxy:
    case FillKind::unsigned_proxy: {
      const bool fp = kind == FillKind::float8_proxy;
      const int64_t n = flat.numel();
      at::Tensor tmp = at::empty({std::min(n, kProxyChunk)}, flat.options().dtype(fp ? at::kFloat : at::kLong));
      for (int64_t off = 0; off < n; off += kProxyChunk) {
        const int64_t len = std::min(kProxyChunk, n - off);
        at::Tensor part = tmp.narrow(0, 0, len);
        if (fp) fill_floating(part, p, gen);
        else part.random_(p.int_low, p.int_high, gen);
        flat.narrow(0, off, len).copy_(part);
      }
      return;
    }
  }
}

}  // namespace optrace::detail
