// optrace/tensor_spec.hpp: what optrace keeps of a tensor instead of its data
#pragma once

#include <optrace/detail/common/compat.hpp>
#include <optrace/op_trace_types.hpp>

#include <cstdint>
#include <vector>

namespace optrace {

/// The metadata of one tensor: enough to rebuild a tensor of the same shape, dtype, strides
/// and device (`optrace/materialize.hpp`), never its values. Mirrors torch.export's TensorMeta.
struct TensorSpec {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< same rank as `sizes`
  int64_t storage_offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  c10::Layout layout = c10::kStrided;
  bool requires_grad = false;

  /// The spec of `t` (which must be defined). Sparse and other non-strided layouts get
  /// empty strides and offset 0.
  static TensorSpec of(const at::Tensor& t) {
    TensorSpec s;
    s.sizes = t.sizes().vec();
    if (t.layout() == c10::kStrided) {
      s.strides = t.strides().vec();
      s.storage_offset = t.storage_offset();
    }
    s.dtype = t.scalar_type();
    s.device = t.device();
    s.layout = t.layout();
    s.requires_grad = t.requires_grad();
    return s;
  }

  /// Contiguous strides for `sizes` (what a freshly allocated tensor has). Saturates at
  /// INT64_MAX for sizes no tensor can have (read from a file).
  static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
    return detail::contiguous_strides(sizes);
  }

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  /// Number of elements; saturates at INT64_MAX for sizes no tensor can have.
  int64_t numel() const {
    for (int64_t s : sizes)
      if (s == 0) return 0;
    int64_t n = 1;
    for (int64_t s : sizes)
      if (__builtin_mul_overflow(n, s, &n)) return INT64_MAX;
    return n;
  }

  friend bool operator==(const TensorSpec& a, const TensorSpec& b) {
    return a.sizes == b.sizes && a.strides == b.strides && a.storage_offset == b.storage_offset &&
           a.dtype == b.dtype && a.device == b.device && a.layout == b.layout &&
           a.requires_grad == b.requires_grad;
  }
  friend bool operator!=(const TensorSpec& a, const TensorSpec& b) { return !(a == b); }
};

}  // namespace optrace
