// optrace/detail/profiler/et_values.hpp: op inputs and outputs as the execution trace keeps them
#pragma once
// The execution trace (execution_trace.hpp) names each tensor by identity: its TensorImpl and its
// storage's data, besides offset, numel, itemsize, device, sizes and strides. Recording keeps
// them as tokens, one flat encoding per value; ids and text are made when the trace is written.

#include <optrace/detail/op_tracer/call_table.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace optrace::detail::profiler {

enum EtToken : int64_t {
  kEtTensor = 1,  // impl, has storage, storage data, offset, numel, itemsize, device type, index, dtype, ndim, sizes, strides
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

// Written straight into the window's tokens (a KeyWriter: a fixed-size part takes one extend).

inline void et_put_string(op_tracer::KeyWriter& out, const std::string& s) {
  const size_t words = (s.size() + 7) / 8;
  int64_t* p = out.extend(1 + words);
  p[0] = static_cast<int64_t>(s.size());
  if (words > 0) {
    p[words] = 0;  // the last token's unused bytes
    std::memcpy(p + 1, s.data(), s.size());
  }
}

inline void et_encode(op_tracer::KeyWriter& out, const c10::IValue& v);

template <class Items>
void et_encode_items(op_tracer::KeyWriter& out, EtToken tag, const Items& items) {
  const size_t n = std::min<size_t>(items.size(), kEtMaxListItems);
  int64_t* p = out.extend(2);
  p[0] = tag;
  p[1] = static_cast<int64_t>(n);
  size_t i = 0;
  for (const c10::IValue& item : items) {
    if (i++ == n) break;
    et_encode(out, item);
  }
}

inline void et_encode(op_tracer::KeyWriter& out, const c10::IValue& v) {
  auto put2 = [&out](int64_t a, int64_t b) {
    int64_t* p = out.extend(2);
    p[0] = a;
    p[1] = b;
  };
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {  // as torch: a tensor (libtorch's one undefined TensorImpl) without storage or dtype
      int64_t* p = out.extend(11);
      std::fill(p, p + 11, 0);
      p[0] = kEtTensor;
      p[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()));
      p[9] = static_cast<int64_t>(c10::ScalarType::Undefined);
      return;
    }
    const bool plain = t.layout() == c10::kStrided && !t.is_nested();
    // As torch: a tensor with storage has its storage's id (its data may be null: an empty
    // tensor's), offset, numel, itemsize and device; one without, zeros and "".
    const bool stored = plain && t.has_storage();
    const size_t ndim = plain ? static_cast<size_t>(t.dim()) : 0;
    int64_t* p = out.extend(11 + 2 * ndim);
    p[0] = kEtTensor;
    p[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()));
    p[2] = stored;
    p[3] = stored ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.storage().data())) : 0;
    p[4] = stored ? t.storage_offset() : 0;
    p[5] = stored ? t.numel() : 0;
    p[6] = stored ? static_cast<int64_t>(t.element_size()) : 0;
    p[7] = static_cast<int64_t>(t.device().type());
    p[8] = t.device().index();
    p[9] = static_cast<int64_t>(t.scalar_type());
    p[10] = static_cast<int64_t>(ndim);
    if (plain) {
      std::copy(t.sizes().begin(), t.sizes().end(), p + 11);
      std::copy(t.strides().begin(), t.strides().end(), p + 11 + ndim);
    }
    return;
  }
  if (v.isNone()) { out.put(kEtNone); return; }
  if (v.isBool()) { put2(kEtBool, v.toBool()); return; }
  if (v.isInt()) { put2(kEtInt, v.toInt()); return; }
  if (v.isSymInt()) { put2(kEtInt, v.toSymInt().expect_int()); return; }
  if (v.isDouble()) {
    int64_t bits;
    const double d = v.toDouble();
    std::memcpy(&bits, &d, sizeof bits);
    put2(kEtDouble, bits);
    return;
  }
  if (v.isString()) {
    out.put(kEtString);
    et_put_string(out, v.toStringRef());
    return;
  }
  if (v.isDevice()) {
    int64_t* p = out.extend(3);
    p[0] = kEtDevice;
    p[1] = static_cast<int64_t>(v.toDevice().type());
    p[2] = v.toDevice().index();
    return;
  }
  if (v.isList()) return et_encode_items(out, kEtList, v.toListRef());
  if (v.isTuple()) return et_encode_items(out, kEtTuple, v.toTupleRef().elements());
  out.put(kEtOther);
  et_put_string(out, v.tagKind());
}

template <class Values>
void et_encode_all(op_tracer::KeyWriter& out, const Values& values) {
  for (const c10::IValue& v : values) et_encode(out, v);
}

}  // namespace optrace::detail::profiler
