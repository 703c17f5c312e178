// optrace/detail/kineto/exporter.hpp: an op trace written as profiler events
#pragma once
// One `cpu_op` event per unique input, its arguments in the profiler's own words (profiler_text.hpp),
// plus what the profiler does not write and the importer reads back: "Overload name", "count",
// "TensorList dtypes", "Dropped calls".

#include <optrace/detail/common/gzip.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/op_schema.hpp>
#include <optrace/detail/kineto/profiler_text.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/kineto_types.hpp>
#include <optrace/op_trace.hpp>
#include <optrace/python_names.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace optrace::detail::kineto {

using optrace::kineto::ExportOptions;

inline void write_ints(json::Writer& w, const std::vector<int64_t>& xs) {
  w.begin_array();
  for (int64_t x : xs) w.value(x);
  w.end_array();
}

// One argument in the profiler's words: "Input type", "Concrete Inputs".
inline void export_value(const std::string& dtype, const OpValue& v, std::string& type, std::string& concrete) {
  using Kind = OpValue::Kind;
  type = "Scalar";
  switch (v.kind()) {
    case Kind::Int: concrete = std::to_string(v.as_int()); return;
    case Kind::Float: concrete = ivalue_double(v.as_float()); return;
    case Kind::Bool: concrete = v.as_bool() ? "True" : "False"; return;
    case Kind::String: {
      const std::string& s = v.as_string();
      if (dtype == python_type_name(ArgKind::Dtype)) {
        if (auto t = scalar_type_from_python(s)) {
          concrete = std::to_string(static_cast<int>(*t));
          return;
        }
      } else if (dtype == python_type_name(ArgKind::Layout)) {
        if (auto n = layout_number(s)) {
          concrete = std::to_string(*n);
          return;
        }
      } else if (dtype == python_type_name(ArgKind::MemoryFormat)) {
        if (auto n = memory_format_number(s)) {
          concrete = std::to_string(*n);
          return;
        }
      } else if (dtype == python_type_name(ArgKind::Complex)) {
        Scalar c = parse_scalar(s);
        if (c.kind == Scalar::Kind::Complex) {
          concrete = ivalue_complex(c.real, c.imag);
          return;
        }
      }
      type.clear();  // str, device, ...: the profiler writes "" and no value; optrace writes the value
      concrete = s;
      return;
    }
    case Kind::List: {
      bool scalars = true;
      for (const OpValue& item : v.as_list())
        scalars = scalars && (item.kind() == Kind::Int || item.kind() == Kind::Float || item.kind() == Kind::Bool);
      if (scalars) {
        type = "ScalarList";
        concrete = "[";
        std::string ignored, text;
        for (const OpValue& item : v.as_list()) {
          if (concrete.size() > 1) concrete += ", ";
          export_value("", item, ignored, text);
          concrete += text;
        }
        concrete += "]";
      } else {
        type = "GenericList";
        json::Writer w;
        v.write(w);
        concrete = w.take();
      }
      return;
    }
    case Kind::None: {
      if (!is_python_scalar_type(dtype)) type.clear();
      concrete.clear();
      return;
    }
    default: type.clear(); concrete.clear(); return;
  }
}

// One call's arguments as the profiler's args keys: "Input Dims", "Input type", "Input Strides",
// "Concrete Inputs" (and "TensorList dtypes", which the profiler does not write). The Profiler
// writes its recorded calls with it too (profiler/kineto_writer.hpp).
inline void write_input_args(json::Writer& w, const OpInput& in) {
  std::vector<std::string> types, concretes;
  bool any_list = false;
  for (size_t k = 0; k < in.input_shapes.size(); ++k) {
    std::string type, concrete;
    if (in.input_shapes[k]) {
      auto name = type_name_of_python_dtype(in.input_dtypes[k]);
      type = name ? *name : in.input_dtypes[k];
    } else if (in.non_tensor_inputs[k].kind() == OpValue::Kind::TensorListRef) {
      type = "TensorList";
      any_list = true;
    } else {
      export_value(in.input_dtypes[k], in.non_tensor_inputs[k], type, concrete);
    }
    types.push_back(std::move(type));
    concretes.push_back(std::move(concrete));
  }
  auto list_of = [&](size_t k) -> const TensorListInfo* {
    const OpValue& v = in.non_tensor_inputs[k];
    return v.kind() == OpValue::Kind::TensorListRef ? in.tensor_list(v.as_tensor_list_ref()) : nullptr;
  };
  w.key("Input Dims").begin_array();
  for (size_t k = 0; k < types.size(); ++k) {
    if (in.input_shapes[k]) {
      write_ints(w, *in.input_shapes[k]);
    } else if (const TensorListInfo* list = list_of(k)) {
      w.begin_array();
      for (const auto& s : list->shapes) write_ints(w, s ? *s : std::vector<int64_t>{});
      w.end_array();
    } else {
      w.begin_array().end_array();
    }
  }
  w.end_array();
  w.key("Input type").begin_array();
  for (const auto& t : types) w.value(t);
  w.end_array();
  w.key("Input Strides").begin_array();
  for (size_t k = 0; k < types.size(); ++k) {
    if (in.input_shapes[k]) {
      bool given = k < in.input_strides.size() && in.input_strides[k];
      write_ints(w, given ? *in.input_strides[k] : contiguous_strides(*in.input_shapes[k]));
    } else if (const TensorListInfo* list = list_of(k)) {
      w.begin_array();
      for (const auto& s : list->shapes) write_ints(w, s ? contiguous_strides(*s) : std::vector<int64_t>{});
      w.end_array();
    } else {
      w.begin_array().end_array();
    }
  }
  w.end_array();
  w.key("Concrete Inputs").begin_array();
  for (const auto& c : concretes) w.value(c);
  w.end_array();
  if (any_list) {
    w.key("TensorList dtypes").begin_array();
    for (size_t k = 0; k < types.size(); ++k) {
      const TensorListInfo* list = list_of(k);
      if (!list) {
        w.null();
        continue;
      }
      w.begin_array();
      for (size_t e = 0; e < list->dtypes.size(); ++e) {
        auto name = type_name_of_python_dtype(list->dtypes[e]);
        w.value(list->shapes[e] ? (name ? *name : list->dtypes[e]) : std::string());
      }
      w.end_array();
    }
    w.end_array();
  }
}

inline void export_input(json::Writer& w, const std::string& op, const OpInput& in, int64_t ts, int64_t id,
                         const optrace::kineto::ExportOptions& options) {
  const auto [qualified, overload] = qualified_name(op);
  w.begin_object();
  w.key("ph").value("X").key("cat").value(kineto_names::name(kineto_names::Category::cpu_op)).key("name").value(qualified);
  w.key("pid").value(options.pid()).key("tid").value(options.tid()).key("ts").value(ts).key("dur").value(int64_t{1});
  w.key("args").begin_object();
  w.key("External id").value(id);
  write_input_args(w, in);
  w.key("Overload name").value(overload);
  w.key("count").value(in.count);
  w.end_object();
  w.end_object();
}

// The op trace as Trace Event Format events (see kineto::to_json).
inline std::string export_trace(const OpTrace& trace, const ExportOptions& options) {
  json::Writer w;
  w.begin_object();
  w.key("schemaVersion").value(int64_t{1});
  w.key("traceName").value("optrace");
  w.key("timesMeasured").value(false);  // the times below are made up: key_averages must not show them
  w.key("displayTimeUnit").value("ms");
  w.key("traceEvents").begin_array();
  w.begin_object().key("ph").value("M").key("name").value("process_name").key("pid").value(options.pid());
  w.key("tid").value(options.tid()).key("args").begin_object().key("name").value("optrace").end_object().end_object();
  int64_t slot = 0;
  for (const OpEntry& e : trace.ops()) {
    for (const OpInput& in : e.unique_inputs) {
      export_input(w, e.name, in, 2 * slot, slot + 1, options);
      ++slot;
    }
    if (e.dropped_calls > 0) {
      const auto [qualified, overload] = qualified_name(e.name);
      w.begin_object().key("ph").value("X").key("cat").value(kineto_names::name(kineto_names::Category::cpu_op)).key("name").value(qualified);
      w.key("pid").value(options.pid()).key("tid").value(options.tid()).key("ts").value(2 * slot).key("dur").value(int64_t{1});
      w.key("args").begin_object().key("External id").value(slot + 1).key("Overload name").value(overload);
      w.key("Dropped calls").value(e.dropped_calls).end_object().end_object();
      ++slot;
    }
  }
  w.end_array();
  w.end_object();
  return w.take();
}

// Writes export_trace's text to `path` (see kineto::save): what the CLI's front end, built without
// libtorch, calls too.
inline void save_trace(const OpTrace& trace, const std::string& path, const ExportOptions& options) {
  write_file_maybe_gzip(path, export_trace(trace, options));
}

}  // namespace optrace::detail::kineto
