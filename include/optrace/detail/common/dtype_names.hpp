// optrace/detail/common/dtype_names.hpp: the dtypes torch names, without libtorch
#pragma once
// A trace names tensor dtypes as Python prints them ("torch.float32"). The readers, which need no
// libtorch, tell a dtype torch has (any version up to 2.9) from a string no torch names: a newer
// torch's dtype or a damaged file. Such a string is kept as read; the commands that show a trace
// name it as unknown (OpTrace::unknown_dtypes) and replay skips the inputs that have it.
// Whether the libtorch at hand has a dtype is python_names.hpp's dtype_from_python.

#include <string_view>
#include <utility>

namespace optrace::detail {

// torch's canonical dtype names after "torch.", as str(dtype) prints them.
inline constexpr std::string_view kTorchDtypes[] = {
    "float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "bool", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
    "int1", "int2", "int3", "int4", "int5", "int6", "int7"};

// The other names torch gives some of them (torch.half is torch.float16), with the canonical one.
inline constexpr std::pair<std::string_view, std::string_view> kTorchDtypeAliases[] = {
    {"half", "float16"},       {"float", "float32"},    {"double", "float64"}, {"cfloat", "complex64"},
    {"cdouble", "complex128"}, {"chalf", "complex32"},  {"short", "int16"},    {"int", "int32"},
    {"long", "int64"}};

// The canonical name of dtype `attr` (what follows "torch."), aliases resolved; empty if torch
// has no such dtype.
inline std::string_view canonical_dtype(std::string_view attr) {
  for (const auto& [alias, name] : kTorchDtypeAliases)
    if (attr == alias) return name;
  for (std::string_view d : kTorchDtypes)
    if (attr == d) return d;
  return {};
}

// Whether `name` ("torch.float32", "torch.half") is a dtype torch has.
inline bool is_torch_dtype(std::string_view name) {
  return name.substr(0, 6) == "torch." && !canonical_dtype(name.substr(6)).empty();
}

}  // namespace optrace::detail
