// optrace/detail/replay/describe.hpp: a unique input in one line, as reports show it
#pragma once
// "f32[2, 3]", "i64[5]", "None", "1", "[1, 1]", "[f32[2], f32[3]]": how tables name an input.

#include <optrace/json/writer.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/python_names.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::detail {

inline void describe_shape(std::string& out, std::string_view dtype, const std::vector<int64_t>& shape) {
  out += short_dtype_name(dtype);
  out += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += ']';
}

inline void describe_value(std::string& out, const OpValue& v, const OpInput& in) {
  switch (v.kind()) {
    case OpValue::Kind::None: out += "None"; break;
    case OpValue::Kind::Bool: out += v.as_bool() ? "True" : "False"; break;
    case OpValue::Kind::Int: out += std::to_string(v.as_int()); break;
    case OpValue::Kind::Float: json::Writer::append_double(out, v.as_float()); break;
    case OpValue::Kind::String: out += v.as_string(); break;
    case OpValue::Kind::List: {
      out += '[';
      const auto& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        describe_value(out, items[i], in);
      }
      out += ']';
      break;
    }
    case OpValue::Kind::TensorListRef: {
      out += '[';
      if (const TensorListInfo* list = in.tensor_list(v.as_tensor_list_ref())) {
        for (int64_t i = 0; i < list->length(); ++i) {
          if (i) out += ", ";
          if (list->shapes[i]) describe_shape(out, list->dtypes[i], *list->shapes[i]);
          else out += "None";
        }
      }
      out += ']';
      break;
    }
  }
}

// The whole input in one line: "f32[5], f32[2, 20], f32[20, 5]".
inline std::string describe_input(const OpInput& in) {
  std::string out;
  for (size_t i = 0; i < in.input_shapes.size(); ++i) {
    if (i) out += ", ";
    if (in.input_shapes[i]) describe_shape(out, in.input_dtypes[i], *in.input_shapes[i]);
    else describe_value(out, in.non_tensor_inputs[i], in);
  }
  for (const OpKwarg& k : in.kwargs) {
    out += out.empty() ? "" : ", ";
    out += k.name + "=";
    if (k.shape) describe_shape(out, k.dtype, *k.shape);
    else describe_value(out, k.value, in);
  }
  return out;
}

}  // namespace optrace::detail
