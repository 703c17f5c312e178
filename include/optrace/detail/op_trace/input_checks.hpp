// optrace/detail/op_trace/input_checks.hpp: what a unique input read from a file cannot be, and the dtypes it names
#pragma once
// Both hf readers, the DOM one (hf_json.hpp) and the On-Demand one (fast_reader.hpp), ask
// first_problem of every unique input they read, so that they refuse exactly the same files:
// a negative size or stride, strides of another rank than their tensor's shape or of an argument
// that is no tensor, a tensor_list_ref to a list the input does not have. What is wrong is named
// by a JSON pointer below the input, which the DOM reader puts under the input's own path.
//
// An unknown dtype string is not a problem here: a newer torch's dtype is possible, so it is read
// and kept; for_each_dtype lets OpTrace::unknown_dtypes name it where the commands show a trace.

#include <optrace/detail/common/json_text.hpp>
#include <optrace/op_trace_types.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace optrace::detail::op_trace {

// What is wrong with an input: `where`, a JSON pointer below the input ("/input_shapes/0/0"),
// and the message ("negative size -3").
struct InputProblem {
  std::string where;
  std::string message;
};

namespace input_checks {

using Where = std::string;

// `member`'s path below the member `key` of the object at `object` ("/kwargs", "out", "/shape":
// "/kwargs/out/shape"), the key escaped as the JSON reader's paths escape it.
inline Where under(const char* object, std::string_view key, const std::string& member) {
  Where path = object;
  json::detail::append_pointer_segment(path, key);
  return path + member;
}

// A negative entry of `dims` (sizes or strides, `what`), as a problem at `where`/index.
inline std::optional<InputProblem> negative(const OptionalShape& dims, const char* what, const Where& where) {
  if (!dims) return std::nullopt;
  for (size_t j = 0; j < dims->size(); ++j)
    if ((*dims)[j] < 0)
      return InputProblem{where + "/" + std::to_string(j), std::string("negative ") + what + " " + std::to_string((*dims)[j])};
  return std::nullopt;
}

// Strides that cannot belong to a tensor of shape `shape`.
inline std::optional<InputProblem> bad_strides(const OptionalShape& shape, const OptionalShape& strides, const Where& where) {
  if (!strides) return std::nullopt;
  if (!shape) return InputProblem{where, "strides for an argument that is not a tensor"};
  if (strides->size() != shape->size())
    return InputProblem{where, "expected " + std::to_string(shape->size()) + " strides (one per dimension of the shape), got " +
                                   std::to_string(strides->size())};
  return negative(strides, "stride", where);
}

// Whether every tensor_list_ref in `v` (a list's items included) names a list of `in`.
inline bool refs_resolve(const OpInput& in, const OpValue& v) {
  if (v.kind() == OpValue::Kind::TensorListRef) return in.tensor_list(v.as_tensor_list_ref()) != nullptr;
  if (v.kind() == OpValue::Kind::List)
    for (const OpValue& item : v.as_list())
      if (!refs_resolve(in, item)) return false;
  return true;
}

// The first tensor_list_ref in `v` (a list's items included) to no list of `in`.
inline std::optional<InputProblem> dangling_ref(const OpInput& in, const OpValue& v, const Where& where) {
  if (v.kind() == OpValue::Kind::List) {
    const auto& items = v.as_list();
    for (size_t k = 0; k < items.size(); ++k)
      if (auto p = dangling_ref(in, items[k], where + "/" + std::to_string(k))) return p;
    return std::nullopt;
  }
  if (v.kind() != OpValue::Kind::TensorListRef || in.tensor_list(v.as_tensor_list_ref()) != nullptr) return std::nullopt;
  std::string ids;
  for (const auto& [id, list] : in.tensor_lists) ids += (ids.empty() ? "\"" : ", \"") + id + "\"";
  return InputProblem{where + "/tensor_list_ref", "no tensor list \"" + std::to_string(v.as_tensor_list_ref()) +
                                                      "\" in tensor_lists (" + (ids.empty() ? "it is empty" : "it has " + ids) + ")"};
}

}  // namespace input_checks

// The first thing `in` cannot be, or nullopt. Expects what the readers check while reading: the
// parallel lists of equal length (input_strides and a list's strides empty or parallel too).
// Paths are built only for a problem: this runs on every input of every trace read.
inline std::optional<InputProblem> first_problem(const OpInput& in) {
  using namespace input_checks;
  auto fine = [](const OptionalShape& dims) {
    if (dims)
      for (int64_t d : *dims)
        if (d < 0) return false;
    return true;
  };
  auto strides_fit = [&fine](const OptionalShape& shape, const OptionalShape& strides) {
    return !strides || (shape && strides->size() == shape->size() && fine(strides));
  };
  const size_t n = in.input_shapes.size();
  for (size_t i = 0; i < n; ++i)
    if (!fine(in.input_shapes[i])) return negative(in.input_shapes[i], "size", "/input_shapes/" + std::to_string(i));
  for (size_t i = 0; i < in.input_strides.size() && i < n; ++i)
    if (!strides_fit(in.input_shapes[i], in.input_strides[i]))
      return bad_strides(in.input_shapes[i], in.input_strides[i], "/input_strides/" + std::to_string(i));
  for (const auto& [id, list] : in.tensor_lists)
    for (size_t k = 0; k < list.shapes.size(); ++k) {
      if (!fine(list.shapes[k]))
        return negative(list.shapes[k], "size", under("/tensor_lists", id, "/shapes/" + std::to_string(k)));
      if (k < list.strides.size() && !strides_fit(list.shapes[k], list.strides[k]))
        return bad_strides(list.shapes[k], list.strides[k], under("/tensor_lists", id, "/strides/" + std::to_string(k)));
    }
  for (const OpKwarg& kw : in.kwargs) {
    if (!fine(kw.shape)) return negative(kw.shape, "size", under("/kwargs", kw.name, "/shape"));
    if (!strides_fit(kw.shape, kw.strides)) return bad_strides(kw.shape, kw.strides, under("/kwargs", kw.name, "/strides"));
  }
  for (size_t i = 0; i < in.non_tensor_inputs.size(); ++i)
    if (!refs_resolve(in, in.non_tensor_inputs[i]))
      return dangling_ref(in, in.non_tensor_inputs[i], "/non_tensor_inputs/" + std::to_string(i));
  for (const OpKwarg& kw : in.kwargs)
    if (!refs_resolve(in, kw.value)) return dangling_ref(in, kw.value, under("/kwargs", kw.name, "/value"));
  return std::nullopt;
}

// Calls `visit(dtype)` with each dtype string `in` names: a tensor's (an argument's, a list
// element's, a keyword argument's) and a dtype argument's value ("<class 'torch.dtype'>").
template <class Visit>
void for_each_dtype(const OpInput& in, Visit&& visit) {
  constexpr std::string_view kDtypeValue = "<class 'torch.dtype'>";
  for (size_t i = 0; i < in.input_shapes.size() && i < in.input_dtypes.size(); ++i) {
    if (in.input_shapes[i]) visit(std::string_view(in.input_dtypes[i]));
    else if (in.input_dtypes[i] == kDtypeValue && i < in.non_tensor_inputs.size() &&
             in.non_tensor_inputs[i].kind() == OpValue::Kind::String)
      visit(std::string_view(in.non_tensor_inputs[i].as_string()));
  }
  for (const auto& [id, list] : in.tensor_lists)
    for (size_t k = 0; k < list.shapes.size() && k < list.dtypes.size(); ++k)
      if (list.shapes[k]) visit(std::string_view(list.dtypes[k]));
  for (const OpKwarg& kw : in.kwargs) {
    if (kw.shape) visit(std::string_view(kw.dtype));
    else if (kw.dtype == kDtypeValue && kw.value.kind() == OpValue::Kind::String) visit(std::string_view(kw.value.as_string()));
  }
}

}  // namespace optrace::detail::op_trace
