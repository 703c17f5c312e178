// optrace/json/tensor_meta.hpp: TensorSpec as torch.export's TensorMeta (serialization schema 8.6)
#pragma once
// The schema (torch/_export/serde/schema.py) numbers dtypes and layouts its own way, not as
// c10 does: ScalarType BYTE = 1 ... BFLOAT16 = 13, UINT16 = 28, FLOAT8E4M3FN = 29,
// FLOAT8E5M2 = 30; Layout SparseCoo = 1 ... Strided = 7. Every mapping here is an explicit
// table, so a renumbering on either side cannot shift values silently.

#include <optrace/detail/common/compat.hpp>
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/tensor_spec.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::json {

namespace detail {

struct SchemaDtype {
  int64_t number;
  const char* name;  // the schema's enum name
};

// The schema's ScalarType enum, UNKNOWN = 0 left out. `c10` is nullopt where the installed
// libtorch lacks the dtype.
struct SchemaDtypeEntry {
  SchemaDtype schema;
  std::optional<c10::ScalarType> c10;
};

inline const std::array<SchemaDtypeEntry, 16>& schema_dtype_table() {
  using optrace::detail::NewerDtype;
  using optrace::detail::newer_dtype;
  using c10::ScalarType;
  static const std::array<SchemaDtypeEntry, 16> table = {{
      {{1, "BYTE"}, ScalarType::Byte},
      {{2, "CHAR"}, ScalarType::Char},
      {{3, "SHORT"}, ScalarType::Short},
      {{4, "INT"}, ScalarType::Int},
      {{5, "LONG"}, ScalarType::Long},
      {{6, "HALF"}, ScalarType::Half},
      {{7, "FLOAT"}, ScalarType::Float},
      {{8, "DOUBLE"}, ScalarType::Double},
      {{9, "COMPLEXHALF"}, ScalarType::ComplexHalf},
      {{10, "COMPLEXFLOAT"}, ScalarType::ComplexFloat},
      {{11, "COMPLEXDOUBLE"}, ScalarType::ComplexDouble},
      {{12, "BOOL"}, ScalarType::Bool},
      {{13, "BFLOAT16"}, ScalarType::BFloat16},
      {{28, "UINT16"}, newer_dtype(NewerDtype::UInt16)},
      {{29, "FLOAT8E4M3FN"}, newer_dtype(NewerDtype::Float8_e4m3fn)},
      {{30, "FLOAT8E5M2"}, newer_dtype(NewerDtype::Float8_e5m2)},
  }};
  return table;
}

}  // namespace detail

/// The torch.export schema's ScalarType number of `dtype`, or nullopt for a dtype the schema
/// does not name (quantized types, uint32, uint64, the float8 fnuz variants, ...).
inline std::optional<int64_t> try_schema_scalar_type(c10::ScalarType dtype) {
  for (const auto& e : detail::schema_dtype_table())
    if (e.c10 && *e.c10 == dtype) return e.schema.number;
  return std::nullopt;
}

/// The torch.export schema's ScalarType number of `dtype` (`c10::kFloat` → 7).
/// Throws `optrace::ArgumentError` naming the dtype when the schema has no number for it.
inline int64_t schema_scalar_type(c10::ScalarType dtype) {
  auto n = try_schema_scalar_type(dtype);
  OPTRACE_CHECK(n.has_value(), ArgumentError, "dtype ", c10::toString(dtype),
                " has no number in the torch.export serialization schema");
  return *n;
}

/// The c10 dtype of a schema ScalarType number (7 → `c10::kFloat`), for readers.
/// Throws `optrace::JsonError` at `path` for a number the schema does not define (0, UNKNOWN,
/// included), and for one the installed libtorch has no dtype for (UINT16 before libtorch
/// 2.3, FLOAT8* before 2.1); the message names the number and the schema's name for it.
inline c10::ScalarType scalar_type_from_schema(int64_t number, const std::string& path = "") {
  for (const auto& e : detail::schema_dtype_table()) {
    if (e.schema.number != number) continue;
    if (!e.c10)
      optrace::detail::raise_json(path, optrace::detail::concat("dtype ", number, " (", e.schema.name,
                                                    ") is not supported by the installed libtorch ",
                                                    TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR));
    return *e.c10;
  }
  optrace::detail::raise_json(path, optrace::detail::concat("unknown dtype number ", number,
                                                " (torch.export schema ScalarType: 1-13, 28-30)"));
}

/// The torch.export schema's Layout number of `layout` (`c10::kStrided` → 7,
/// `c10::kSparse` → 1 (SparseCoo), `c10::kMkldnn` → 6).
/// Throws `optrace::ArgumentError` for a layout the schema does not name (jagged).
inline int64_t schema_layout(c10::Layout layout) {
  switch (layout) {
    case c10::kSparse: return 1;
    case c10::kSparseCsr: return 2;
    case c10::kSparseCsc: return 3;
    case c10::kSparseBsr: return 4;
    case c10::kSparseBsc: return 5;
    case c10::kMkldnn: return 6;
    case c10::kStrided: return 7;
    default: break;
  }
  optrace::detail::raise<ArgumentError>("layout ", layout, " has no number in the torch.export serialization schema");
}

/// The c10 layout of a schema Layout number (7 → `c10::kStrided`).
/// Throws `optrace::JsonError` at `path` for a number outside 1-7 (0, Unknown, included).
inline c10::Layout layout_from_schema(int64_t number, const std::string& path = "") {
  switch (number) {
    case 1: return c10::kSparse;
    case 2: return c10::kSparseCsr;
    case 3: return c10::kSparseCsc;
    case 4: return c10::kSparseBsr;
    case 5: return c10::kSparseBsc;
    case 6: return c10::kMkldnn;
    case 7: return c10::kStrided;
    default: break;
  }
  optrace::detail::raise_json(path, optrace::detail::concat("unknown layout number ", number,
                                                " (torch.export schema Layout: 1-7)"));
}

/// The schema Device's `type` string of `device`, as Python's `torch.device.type` reads:
/// "cpu", "cuda", "meta", ...
inline std::string schema_device_type(c10::Device device) {
  return c10::DeviceTypeName(device.type(), /*lower_case=*/true);
}

/// Writes `device` as the schema's Device: `{"type": "cuda", "index": 0}`, or
/// `{"type": "cpu", "index": null}` for a device without an index.
inline void write_device(Writer& w, c10::Device device) {
  w.begin_object().key("type").value(schema_device_type(device)).key("index");
  if (device.has_index()) w.value(static_cast<int64_t>(device.index()));
  else w.null();
  w.end_object();
}

/// The device a schema Device names: `type` as torch writes it ("cpu", "cuda", "meta", ...)
/// and an optional index.
/// Throws `optrace::JsonError` at `path` for a type libtorch does not know (or one that
/// carries its own ":index"), and for an index outside 0-127 or on a CPU device.
inline c10::Device device_from_schema(std::string_view type, std::optional<int64_t> index,
                                      const std::string& path = "") {
  std::optional<c10::Device> device;
  if (!type.empty() && type.find(':') == std::string_view::npos) {
    try {
      device = c10::Device(std::string(type));
    } catch (const c10::Error&) {
    }
  }
  if (!device)
    optrace::detail::raise_json(path + "/type", optrace::detail::concat("unknown device type \"", type, "\""));
  if (index) {
    if (*index < 0 || *index > 127 || device->is_cpu())
      optrace::detail::raise_json(path + "/index", optrace::detail::concat("invalid index ", *index, " for device type \"",
                                                               type, "\""));
    device->set_index(static_cast<c10::DeviceIndex>(*index));
  }
  return *device;
}

/// Writes a schema SymInt: `{"as_int": 8}` when `symbol` is empty, else
/// `{"as_expr": {"expr_str": "s0", "hint": {"as_int": 8}}}` (`value` is the hint).
inline void write_sym_int(Writer& w, int64_t value, std::string_view symbol = {}) {
  w.begin_object();
  if (symbol.empty()) {
    w.key("as_int").value(value);
  } else {
    w.key("as_expr").begin_object().key("expr_str").value(symbol);
    w.key("hint").begin_object().key("as_int").value(value).end_object();
    w.end_object();
  }
  w.end_object();
}

/// Writes `spec` as the schema's TensorMeta, keys in the schema's field order: `dtype`,
/// `sizes`, `requires_grad`, `device`, `strides`, `storage_offset`, `layout`.
/// `dim_symbols`, when not empty, has one entry per dim: a symbol (`"s0"`) writes that size as
/// `as_expr` with the recorded size as hint, `""` writes it as `as_int`. Strides and the
/// storage offset are always written as `as_int` (their recorded values). A spec with empty
/// strides (a sparse tensor) writes `"strides": []`.
/// Throws `optrace::ArgumentError` when the dtype or layout has no schema number, or when
/// `dim_symbols` is neither empty nor of the spec's rank.
///
/// Example:
///   json::Writer w;
///   json::write_tensor_meta(w, TensorSpec::of(x), {"s0", ""});
inline void write_tensor_meta(Writer& w, const TensorSpec& spec, const std::vector<std::string>& dim_symbols = {}) {
  OPTRACE_CHECK(dim_symbols.empty() || dim_symbols.size() == spec.sizes.size(), ArgumentError,
                "write_tensor_meta: ", dim_symbols.size(), " dim symbols for a tensor of rank ", spec.sizes.size());
  const int64_t dtype = schema_scalar_type(spec.dtype);
  const int64_t layout = schema_layout(spec.layout);
  w.begin_object();
  w.key("dtype").value(dtype);
  w.key("sizes").begin_array();
  for (size_t i = 0; i < spec.sizes.size(); ++i)
    write_sym_int(w, spec.sizes[i], dim_symbols.empty() ? std::string_view() : std::string_view(dim_symbols[i]));
  w.end_array();
  w.key("requires_grad").value(spec.requires_grad);
  w.key("device");
  write_device(w, spec.device);
  w.key("strides").begin_array();
  for (int64_t s : spec.strides) write_sym_int(w, s);
  w.end_array();
  w.key("storage_offset");
  write_sym_int(w, spec.storage_offset);
  w.key("layout").value(layout);
  w.end_object();
}

/// `spec` as a TensorMeta JSON string (compact, Python's separators); see `write_tensor_meta`.
/// Throws what `write_tensor_meta` throws.
inline std::string tensor_meta_json(const TensorSpec& spec, const std::vector<std::string>& dim_symbols = {}) {
  Writer w;
  write_tensor_meta(w, spec, dim_symbols);
  return w.take();
}

}  // namespace optrace::json
