// optrace/detail/op_tracer/decoder.hpp: OpTracer's recorded calls turned into an OpTrace, at trace() time
#pragma once
// The recorder keeps calls as token encodings (recorder.hpp); only here do they become names,
// dtype strings and Python values, once per unique call.

#include <optrace/detail/common/dispatcher.hpp>
#include <optrace/detail/op_tracer/call_table.hpp>
#include <optrace/detail/op_tracer/recorder.hpp>
#include <optrace/error.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/python_names.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace::detail::op_tracer {

inline std::string device_name(int64_t type, int64_t index) {
  return c10::Device(static_cast<c10::DeviceType>(type), static_cast<c10::DeviceIndex>(index)).str();
}

struct Decoded {
  OptionalShape shape;
  std::string dtype;
  OpValue value;
  std::optional<TensorListInfo> list;  // a tensor list: value becomes its reference
  OptionalShape strides;
  std::optional<std::string> device;
};

class Decoder {
 public:
  Decoder(const int64_t* key, size_t size, size_t pos, bool extended)
      : k_(key), size_(size), p_(pos), extended_(extended) {}
  Decoder(const std::vector<int64_t>& key, size_t pos, bool extended) : Decoder(key.data(), key.size(), pos, extended) {}
  size_t pos() const { return p_; }
  int64_t next() {
    int64_t token = peek();
    ++p_;
    return token;
  }
  bool done() const { return p_ >= size_; }
  int64_t peek() const {
    if (p_ >= size_) raise<Error>("an encoded call ends early");  // a bug of the encoder, never the user's input
    return k_[p_];
  }

  Decoded value() {
    Decoded d;
    int64_t tag = next();
    switch (tag) {
      case kTensor: {
        tensor(d, extended_);
        return d;
      }
      case kTensorList: {
        int64_t n = next();
        TensorListInfo list;
        for (int64_t i = 0; i < n; ++i) {
          if (peek() == kNone) {
            next();
            list.shapes.emplace_back();
            list.dtypes.emplace_back(python_type_name(ArgKind::None));
          } else {
            next();
            Decoded t;
            tensor(t, extended_, /*device=*/false);
            list.shapes.push_back(t.shape);
            list.dtypes.push_back(t.dtype);
            list.strides.push_back(std::move(t.strides));
          }
        }
        bool any_strides = false;
        for (const auto& s : list.strides) any_strides = any_strides || s.has_value();
        if (any_strides) list.strides.resize(list.shapes.size());
        else list.strides.clear();
        d.dtype = python_type_name(ArgKind::List);
        d.list = std::move(list);
        return d;
      }
      default: {
        --p_;
        d.value = plain(d.dtype);
        return d;
      }
    }
  }

 private:
  void tensor(Decoded& d, bool extended, bool device = true) {
    d.dtype = python_dtype_name(static_cast<c10::ScalarType>(next()));
    int64_t ndim = next();
    std::vector<int64_t> sizes(static_cast<size_t>(ndim));
    for (auto& s : sizes) s = next();
    d.shape = std::move(sizes);
    if (extended) {
      if (device) {
        int64_t type = next();
        int64_t index = next();
        d.device = device_name(type, index);
      }
      if (next() == 0) {
        std::vector<int64_t> strides(static_cast<size_t>(ndim));
        for (auto& s : strides) s = next();
        d.strides = std::move(strides);
      }
    }
  }

  static double as_double(int64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }

  // A non-tensor value; `type` gets Python's type string.
  OpValue plain(std::string& type) {
    int64_t tag = next();
    switch (tag) {
      case kNone: type = python_type_name(ArgKind::None); return OpValue::none();
      case kBool: type = python_type_name(ArgKind::Bool); return OpValue::boolean(next() != 0);
      case kInt: type = python_type_name(ArgKind::Int); return OpValue::integer(next());
      case kFloat: type = python_type_name(ArgKind::Float); return OpValue::floating(as_double(next()));
      case kString: {
        type = python_type_name(ArgKind::String);
        size_t n = static_cast<size_t>(next());
        std::string s(n, '\0');
        for (size_t i = 0; i < n; i += 8) {
          int64_t packed = next();
          std::memcpy(&s[i], &packed, std::min<size_t>(8, n - i));
        }
        return OpValue::string(std::move(s));
      }
      case kDtype: type = python_type_name(ArgKind::Dtype); return OpValue::string(python_dtype_name(static_cast<c10::ScalarType>(next())));
      case kLayout: type = python_type_name(ArgKind::Layout); return OpValue::string(layout_name(next()));
      case kMemoryFormat: type = python_type_name(ArgKind::MemoryFormat); return OpValue::string(memory_format_name(next()));
      case kDevice: {
        type = python_type_name(ArgKind::Device);
        int64_t t = next();
        return OpValue::string(device_name(t, next()));
      }
      case kComplex: {
        type = python_type_name(ArgKind::Complex);
        double re = as_double(next());
        return OpValue::string(python_complex(re, as_double(next())));
      }
      case kList:
      case kTuple: {
        type = python_type_name(tag == kList ? ArgKind::List : ArgKind::Tuple);
        int64_t n = next();
        std::vector<OpValue> items;
        std::string ignored;
        for (int64_t i = 0; i < n; ++i) {
          if (peek() == kTensor || peek() == kTensorList) {  // a tensor inside a tuple: Python cannot write it either
            Decoded inner = value();
            items.push_back(OpValue::none());
            continue;
          }
          items.push_back(plain(ignored));
        }
        return OpValue::list(std::move(items));
      }
      case kGenerator: type = python_type_name(ArgKind::Generator); return OpValue::none();
      default: type = python_type_name(ArgKind::Other); return OpValue::none();
    }
  }

  const int64_t* k_;
  size_t size_;
  size_t p_;
  bool extended_;
};

inline OpInput decode_call(const std::vector<int64_t>& key, const OpInfo& op, const Aggregate& agg, bool extended) {
  OpInput in;
  in.count = agg.count;
  size_t positional = static_cast<size_t>(key.at(1));
  Decoder dec(key, 2, extended);
  bool any_strides = false;
  for (size_t i = 0; i < positional; ++i) {
    Decoded d = dec.value();
    if (d.list) d.value = in.add_tensor_list(std::move(*d.list));
    in.input_shapes.push_back(std::move(d.shape));
    in.input_dtypes.push_back(std::move(d.dtype));
    in.non_tensor_inputs.push_back(std::move(d.value));
    if (extended) {
      any_strides = any_strides || d.strides.has_value();
      in.input_strides.push_back(std::move(d.strides));
      in.input_devices.push_back(std::move(d.device));
    }
  }
  if (extended) {
    while (!dec.done() && dec.peek() == kKwarg) {
      dec.next();
      size_t index = static_cast<size_t>(dec.next());
      Decoded d = dec.value();
      OpKwarg kw;
      kw.name = op.live->schema->arguments().at(index).name();
      if (d.list) d.value = in.add_tensor_list(std::move(*d.list));
      kw.shape = std::move(d.shape);
      kw.dtype = std::move(d.dtype);
      kw.value = std::move(d.value);
      kw.strides = std::move(d.strides);
      in.kwargs.push_back(std::move(kw));
    }
    if (!any_strides) in.input_strides.clear();
    bool any_range = false;
    for (const auto& r : agg.ranges) any_range = any_range || r.has_value();
    if (any_range) {
      in.input_value_ranges = agg.ranges;
      in.input_value_ranges.resize(positional);
    }
  }
  return in;
}

// Adds one thread's dropped calls into `into`.
inline void merge_dropped(const ThreadBuffer& buffer, std::unordered_map<const OpInfo*, Dropped>& into) {
  for (const auto& [op, d] : buffer.dropped) {
    auto [it, fresh] = into.emplace(op, d);
    if (fresh) continue;
    Dropped& to = it->second;
    to.count += d.count;
    to.over_budget += d.over_budget;
    if (to.unreadable.empty()) to.unreadable = d.unreadable;
    to.first_seen = std::min(to.first_seen, d.first_seen);
  }
}

// Every op's dropped calls, all threads merged, in first-seen order.
inline std::vector<std::pair<const OpInfo*, Dropped>> collect_dropped(Session& s) {
  std::unordered_map<const OpInfo*, Dropped> dropped;
  s.buffers.for_each([&dropped](ThreadBuffer& buffer) {
    std::lock_guard<SpinLock> buffer_lock(buffer.mutex);
    merge_dropped(buffer, dropped);
  });
  std::vector<std::pair<const OpInfo*, Dropped>> out(dropped.begin(), dropped.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second.first_seen < b.second.first_seen; });
  return out;
}

// Merges every thread's buffer of `s` into an OpTrace: ops and inputs in first-seen order.
inline OpTrace collect(Session& s) {
  struct Item {
    uint64_t first_seen;
    const OpInfo* op;
    const std::vector<int64_t>* key;  // nullptr: dropped calls
    Aggregate agg;
  };
  std::unordered_map<std::vector<int64_t>, Aggregate, SignatureHash> calls;
  std::unordered_map<const OpInfo*, Dropped> dropped;
  s.buffers.for_each([&calls, &dropped](ThreadBuffer& buffer) {
    std::lock_guard<SpinLock> buffer_lock(buffer.mutex);
    for (const CallTable::Entry& entry : buffer.calls.entries()) {
      const Aggregate& agg = entry.agg;
      auto [it, fresh] = calls.emplace(buffer.calls.key(entry), agg);
      if (fresh) continue;
      Aggregate& into = it->second;
      into.count += agg.count;
      into.first_seen = std::min(into.first_seen, agg.first_seen);
      if (into.ranges.size() < agg.ranges.size()) into.ranges.resize(agg.ranges.size());
      for (size_t i = 0; i < agg.ranges.size(); ++i) {
        if (!agg.ranges[i]) continue;
        auto& r = into.ranges[i];
        r = r ? std::make_pair(std::min(r->first, agg.ranges[i]->first), std::max(r->second, agg.ranges[i]->second))
              : *agg.ranges[i];
      }
    }
    merge_dropped(buffer, dropped);
  });
  std::vector<Item> items;
  items.reserve(calls.size() + dropped.size());
  for (const auto& [key, agg] : calls)
    items.push_back(Item{agg.first_seen, reinterpret_cast<const OpInfo*>(static_cast<intptr_t>(key[0])), &key, agg});
  for (const auto& [op, d] : dropped) items.push_back(Item{d.first_seen, op, nullptr, Aggregate{d.count, d.first_seen, {}}});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.first_seen < b.first_seen; });
  OpTrace trace;
  for (const Item& item : items) {
    if (item.key == nullptr) trace.add_dropped(item.op->name, item.agg.count);
    else trace.add(item.op->name, decode_call(*item.key, *item.op, item.agg, s.settings.extended));
  }
  return trace;
}

}  // namespace optrace::detail::op_tracer
