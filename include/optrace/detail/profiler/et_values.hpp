// optrace/detail/profiler/et_values.hpp: op inputs and outputs as the execution trace keeps them
#pragma once
// The execution trace (execution_trace.hpp) names each tensor by identity: its TensorImpl and its
// storage's data, besides offset, numel, itemsize, device, sizes and strides. Recording keeps
// them as tokens, one flat encoding per value; ids and text are made when the trace is written.

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace optrace::detail::profiler {

enum EtToken : int64_t {
  kEtTensor = 1,  // impl, storage data (0: none), offset, numel, itemsize, device type, index, dtype, ndim, sizes, strides
  kEtNone,        //
  kEtInt,         // value
  kEtDouble,      // bits
  kEtBool,        // value
  kEtString,      // length, chars packed 8 per token
  kEtDevice,      // type, index
  kEtList,        // n, items
  kEtTuple,       // n, items
  kEtOther,       // the tag's name as a string (length, chars)
};

// torch's execution trace writes at most this many elements of a list.
constexpr size_t kEtMaxListItems = 4097;

inline void et_put_string(std::vector<int64_t>& out, const std::string& s) {
  out.push_back(static_cast<int64_t>(s.size()));
  for (size_t i = 0; i < s.size(); i += 8) {
    int64_t packed = 0;
    std::memcpy(&packed, s.data() + i, std::min<size_t>(8, s.size() - i));
    out.push_back(packed);
  }
}

inline void et_encode(std::vector<int64_t>& out, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      out.push_back(kEtNone);
      return;
    }
    const bool plain = t.layout() == c10::kStrided && !t.is_nested();
    out.push_back(kEtTensor);
    out.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl())));
    const void* data = plain && t.has_storage() ? static_cast<const void*>(t.storage().data()) : nullptr;
    out.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(data)));
    out.push_back(plain ? t.storage_offset() : 0);
    out.push_back(plain ? t.numel() : 0);
    out.push_back(plain ? static_cast<int64_t>(t.element_size()) : 0);
    out.push_back(static_cast<int64_t>(t.device().type()));
    out.push_back(t.device().index());
    out.push_back(static_cast<int64_t>(t.scalar_type()));
    if (!plain) {
      out.push_back(0);
      return;
    }
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    out.push_back(static_cast<int64_t>(sizes.size()));
    out.insert(out.end(), sizes.begin(), sizes.end());
    out.insert(out.end(), strides.begin(), strides.end());
    return;
  }
  if (v.isNone()) { out.push_back(kEtNone); return; }
  if (v.isBool()) { out.push_back(kEtBool); out.push_back(v.toBool()); return; }
  if (v.isInt()) { out.push_back(kEtInt); out.push_back(v.toInt()); return; }
  if (v.isSymInt()) { out.push_back(kEtInt); out.push_back(v.toSymInt().expect_int()); return; }
  if (v.isDouble()) {
    int64_t bits;
    const double d = v.toDouble();
    std::memcpy(&bits, &d, sizeof bits);
    out.push_back(kEtDouble);
    out.push_back(bits);
    return;
  }
  if (v.isString()) { out.push_back(kEtString); et_put_string(out, v.toStringRef()); return; }
  if (v.isDevice()) {
    out.push_back(kEtDevice);
    out.push_back(static_cast<int64_t>(v.toDevice().type()));
    out.push_back(v.toDevice().index());
    return;
  }
  if (v.isList() || v.isTuple()) {
    const bool list = v.isList();
    std::vector<c10::IValue> items;
    if (list) {
      for (const auto& item : v.toListRef()) items.push_back(item);
    } else {
      for (const auto& item : v.toTupleRef().elements()) items.push_back(item);
    }
    const size_t n = std::min(items.size(), kEtMaxListItems);
    out.push_back(list ? kEtList : kEtTuple);
    out.push_back(static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) et_encode(out, items[i]);
    return;
  }
  out.push_back(kEtOther);
  et_put_string(out, v.tagKind());
}

template <class Values>
void et_encode_all(std::vector<int64_t>& out, const Values& values) {
  for (const c10::IValue& v : values) et_encode(out, v);
}

}  // namespace optrace::detail::profiler
