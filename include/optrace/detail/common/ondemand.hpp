// optrace/detail/common/ondemand.hpp: helpers for reading with simdjson's On-Demand API
#pragma once
// Both fast readers (the hf op trace's, detail/op_trace/fast_reader.hpp, and the Kineto
// importer, detail/kineto/importer.hpp) walk documents with On-Demand: no DOM is built, and a
// value is read only when asked, so each value may be read once. They differ in what they do on
// failure (the op-trace reader gives up and lets the DOM reader name the path; the importer
// names the path itself), so `take` is given that as a function.

#include <optrace/detail/common/json_text.hpp>

#include <simdjson.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace optrace::detail::ondemand {

namespace od = simdjson::ondemand;

/// The value of `result`, or `on_error(code)` (which must not return) when it holds an error.
template <class T, class Result, class OnError>
T take(Result&& result, OnError&& on_error) {
  T out{};
  if (auto e = std::forward<Result>(result).get(out)) on_error(e);
  return out;
}

/// The JSON text of a scalar value, spaces after it trimmed (On-Demand leaves them in).
template <class V>
std::string_view raw_token(V& v) {
  if constexpr (std::is_same_v<std::decay_t<V>, od::document>) {
    std::string_view s;
    if (v.raw_json_token().get(s)) return {};
    return json::detail::trim(s);
  } else {
    return json::detail::trim(v.raw_json_token());
  }
}

/// A string value's text without copying it out of the document when it holds no escape (the
/// usual case: op names, categories); escaped ones are unescaped by simdjson. False if `v` is not
/// a string.
template <class V>
bool read_string(V& v, std::string_view& out) {
  const std::string_view token = raw_token(v);
  if (token.size() >= 2 && token[0] == '"' && token.back() == '"' &&
      std::memchr(token.data() + 1, '\\', token.size() - 2) == nullptr) {
    out = token.substr(1, token.size() - 2);
    return true;
  }
  return !v.get_string().get(out);
}

/// Python's float tokens (`NaN`, `Infinity`, `-Infinity`), which On-Demand does not read as
/// numbers: their value, or nullopt for any other token.
template <class V>
std::optional<double> python_float(V& v) {
  return json::detail::python_float_token(raw_token(v));
}

/// The whole JSON text of `v` (a list or an object included), trimmed; an error code if it is
/// malformed.
template <class V>
simdjson::error_code raw_json(V& v, std::string_view& out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return e;
  simdjson::error_code e = simdjson::SUCCESS;
  if (t == od::json_type::array) {
    od::array a;
    e = v.get_array().get(a);
    if (!e) e = a.raw_json().get(out);
  } else if (t == od::json_type::object) {
    od::object o;
    e = v.get_object().get(o);
    if (!e) e = o.raw_json().get(out);
  } else {
    out = raw_token(v);
  }
  out = json::detail::trim(out);
  return e;
}

/// What a value is, worded as the DOM reader words it (json::Node::describe), for messages.
template <class V>
std::string describe(V& v) {
  od::json_type t;
  if (v.type().get(t)) return "malformed JSON";
  switch (t) {
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return "a malformed string";
      return json::detail::describe_string(s);
    }
    case od::json_type::number: return json::detail::describe_number(raw_token(v));
    case od::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b)) return "a boolean";
      return b ? "true" : "false";
    }
    case od::json_type::null: return "null";
    case od::json_type::array: {
      size_t n = 0;
      if (v.count_elements().get(n)) return "a list";
      return json::detail::describe_list(n);
    }
    case od::json_type::object: return "an object";
  }
  return "an unknown value";
}

/// Whether a field's key is `name` (which holds no quote or backslash), compared in place: the
/// name's bytes and then the closing quote (an escaped key never matches). Reads name.size() + 1
/// bytes of the document, which simdjson's padding makes safe at its very end too.
inline bool key_is(const char* raw_key, std::string_view name) {
  return std::memcmp(raw_key, name.data(), name.size()) == 0 && raw_key[name.size()] == '"';
}

}  // namespace optrace::detail::ondemand
