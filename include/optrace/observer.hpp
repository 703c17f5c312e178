// optrace/observer.hpp: InputObserver, which wraps a model and records what it is fed
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/detail/observer/analysis.hpp>
#include <optrace/detail/observer/observation_file.hpp>
#include <optrace/detail/observer/recorder.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/value.hpp>

#include <torch/script.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace optrace {

/// Options of InputObserver, in libtorch's chained-setter style.
///
/// Example:
///   optrace::ObserverOptions().store_n_calls(5).value_if_missing("mask", torch::ones({0, 10}))
class ObserverOptions {
 public:
  /// Keep the tensors (detached copies) of the first `n` calls; they become the export
  /// arguments. Every call still counts for dynamic shapes. Default: 3.
  ObserverOptions& store_n_calls(int64_t n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "store_n_calls must be >= 0, got ", n);
    store_n_calls_ = n;
    return *this;
  }
  /// What an optional argument stands for in calls that lack it (not passed, nullopt or None):
  /// it then takes part in dynamic shapes and export arguments. Default: none.
  ObserverOptions& value_if_missing(const std::string& name, c10::IValue value) {
    missing_by_name_.emplace_back(name, std::move(value));
    return *this;
  }
  /// The same for the positional argument at `position` (0-based).
  ObserverOptions& value_if_missing(int64_t position, c10::IValue value) {
    OPTRACE_CHECK(position >= 0, ArgumentError, "value_if_missing position must be >= 0, got ", position);
    missing_by_position_.emplace_back(position, std::move(value));
    return *this;
  }
  /// Names of the positional arguments of a C++ module or callable, so that positional and
  /// keyword calls line up and results can be keyed by name. TorchScript modules take them
  /// from their schema. Default: none (positional arguments are `#0`, `#1`, ...).
  ObserverOptions& arg_names(std::vector<std::string> names) {
    arg_names_ = std::move(names);
    return *this;
  }
  /// Bound on the distinct call signatures (shapes, dtypes, devices, scalars) kept with their
  /// counts. Calls with new signatures past it still count for dynamic dims and ranges, as
  /// per-dim min/max. Default: 10000.
  ObserverOptions& max_signatures(int64_t n) {
    OPTRACE_CHECK(n >= 1, ArgumentError, "max_signatures must be >= 1, got ", n);
    max_signatures_ = n;
    return *this;
  }

  int64_t store_n_calls() const { return store_n_calls_; }
  int64_t max_signatures() const { return max_signatures_; }
  const std::vector<std::string>& arg_names() const { return arg_names_; }
  const std::vector<std::pair<std::string, c10::IValue>>& missing_by_name() const { return missing_by_name_; }
  const std::vector<std::pair<int64_t, c10::IValue>>& missing_by_position() const { return missing_by_position_; }

 private:
  int64_t store_n_calls_ = 3;
  int64_t max_signatures_ = 10000;
  std::vector<std::string> arg_names_;
  std::vector<std::pair<std::string, c10::IValue>> missing_by_name_;
  std::vector<std::pair<int64_t, c10::IValue>> missing_by_position_;
};

/// Wraps a model and records every call's inputs (and, for stored calls, outputs), to infer
/// which dims are dynamic and a representative set of export arguments.
///
/// `Module` is a TORCH_MODULE holder or `std::shared_ptr` to an `nn::Module` subclass
/// (`forward` is called), a `torch::jit::Module` (its schema names the arguments and gives
/// their defaults), an `optrace::aoti::Package` (it names its arguments), or any callable.
///
/// Thread-safe: calls from several threads are all recorded. A call that cannot be recorded
/// (an unsupported IValue type) still runs the model; the error is raised by the infer_*
/// methods.
///
/// Example:
///   optrace::InputObserver<Net> observer(net, optrace::ObserverOptions().store_n_calls(3));
///   for (auto& batch : batches) observer(batch.x, batch.y);
///   std::cout << observer.infer_dynamic_shapes().to_python();
///   optrace::Arguments args = observer.infer_arguments();
template <class Module>
class InputObserver {
  static constexpr bool kIsScript = std::is_same_v<std::decay_t<Module>, torch::jit::Module>;

 public:
  explicit InputObserver(Module model, const ObserverOptions& options = {}) : model_(std::move(model)) {
    detail::RecorderSetup setup;
    setup.store_n_calls = options.store_n_calls();
    setup.max_signatures = options.max_signatures();
    setup.names = options.arg_names();
    if constexpr (kIsScript) {
      const c10::FunctionSchema& schema = model_.get_method("forward").function().getSchema();
      setup.names.clear();
      const auto& args = schema.arguments();
      for (size_t k = 1; k < args.size(); ++k) {  // 0 is self
        setup.names.push_back(args[k].name());
        if (args[k].default_value()) setup.defaults.emplace_back(args[k].name(), *args[k].default_value());
      }
    }
    if constexpr (detail::has_argument_names<Module>::value) {
      if (setup.names.empty()) setup.names = model_.argument_names();
    }
    setup.missing = options.missing_by_name();
    setup.missing_by_position = options.missing_by_position();
    recorder_ = std::make_unique<detail::Recorder>(std::move(setup));
  }

  /// Calls the model with `args` (as `model->forward(args...)`, `module.forward({args...})` or
  /// `model(args...)`) and records them. Returns what the model returns.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    if constexpr (kIsScript) {
      return call(std::vector<c10::IValue>{c10::IValue(std::forward<Args>(args))...}, {});
    } else {
      int64_t slot = record([&](auto& visitor) { (visit_value(args, visitor), ...); }, [&](bool keep_data) {
        std::vector<Value> positional;
        (positional.push_back(to_value(args, keep_data)), ...);
        return recorder_->normalize(std::move(positional), {}, keep_data);
      }, false);
      return invoke_and_record_output(slot, [&]() -> decltype(auto) { return invoke(std::forward<Args>(args)...); });
    }
  }

  /// A call with keyword arguments: `module.forward(args, kwargs)` for a TorchScript module,
  /// `model(args, kwargs)` for a callable taking `(std::vector<c10::IValue>, torch::jit::Kwargs)`.
  c10::IValue call(std::vector<c10::IValue> args, const torch::jit::Kwargs& kwargs = {}) {
    static_assert(kIsScript || std::is_invocable_v<Module&, std::vector<c10::IValue>, const torch::jit::Kwargs&>,
                  "InputObserver::call needs a torch::jit::Module or a callable taking "
                  "(std::vector<c10::IValue>, torch::jit::Kwargs); call C++ modules with observer(args...)");
    std::vector<std::pair<const std::string*, const c10::IValue*>> sorted;
    for (const auto& kv : kwargs) sorted.emplace_back(&kv.first, &kv.second);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
    int64_t slot = record(
        [&](auto& visitor) {
          for (const auto& a : args) visit_value(a, visitor);
          for (const auto& [name, value] : sorted) {
            visitor.key(*name);
            visit_value(*value, visitor);
          }
        },
        [&](bool keep_data) {
          std::vector<Value> positional;
          for (const auto& a : args) positional.push_back(to_value(a, keep_data));
          std::vector<std::pair<std::string, Value>> keywords;
          for (const auto& [name, value] : sorted) keywords.emplace_back(*name, to_value(*value, keep_data));
          return recorder_->normalize(std::move(positional), std::move(keywords), keep_data);
        },
        !kwargs.empty());
    return invoke_and_record_output(slot, [&]() -> c10::IValue {
      if constexpr (kIsScript) return model_.forward(std::move(args), kwargs);
      else return model_(std::move(args), kwargs);
    });
  }

  /// Number of stored calls (at most store_n_calls).
  int64_t num_obs() const { return recorder_->num_stored(); }
  /// Number of calls recorded, stored or not.
  int64_t num_calls() const { return recorder_->total_calls(); }

  /// Which dims are dynamic across every recorded call. Throws ArgumentError when the calls
  /// cannot be aligned (no call has every argument, a tensor changed rank or dtype, a container
  /// changed length, a scalar changed value), naming the argument.
  DynamicShapes infer_dynamic_shapes(const DynamicShapesOptions& options = {}) const {
    return detail::infer_dynamic_shapes(recorder_->snapshot(), options);
  }

  /// A representative set of export arguments from the stored calls (see
  /// InferArgumentsOptions). Throws like infer_dynamic_shapes, and ArgumentError when nothing
  /// was stored or the index is out of range.
  Arguments infer_arguments(const InferArgumentsOptions& options = {}) const {
    return detail::infer_arguments(recorder_->snapshot(), options);
  }
  /// The export arguments from the stored call at `index`, missing inputs filled.
  Arguments infer_arguments(int64_t index) const { return infer_arguments(InferArgumentsOptions().call_index(index)); }

  /// The stored calls: Dict values keyed by argument, with tensor data.
  std::vector<Value> observations() const { return recorder_->snapshot().stored; }
  /// The outputs of the stored calls (None where the return type is not recordable).
  std::vector<Value> outputs() const { return recorder_->outputs(); }
  /// Every distinct call signature (specs and scalars, no data) with its number of calls.
  std::vector<std::pair<Value, int64_t>> history() const {
    detail::CallSet s = recorder_->snapshot();
    std::vector<std::pair<Value, int64_t>> out;
    for (size_t k = 0; k < s.signatures.size(); ++k) out.emplace_back(std::move(s.signatures[k]), s.counts[k]);
    return out;
  }
  /// The observation file (optrace/observations.hpp): per input a torch.export TensorMeta,
  /// range constraints, treespec, dynamic-shapes spec, and the call history, without the data.
  /// Throws ArgumentError for a dtype the export schema has no number for (uint32, ...).
  std::string to_json(int indent = 1) const { return detail::observations_json(recorder_->snapshot(), indent); }
  /// Writes `to_json()` to `path` atomically (temporary file, then rename): a failure never
  /// leaves a truncated file. Throws IoError.
  void save(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }

  Module& module() { return model_; }

 private:
  template <class Encode, class Build>
  int64_t record(Encode&& encode, Build&& build, bool keyed) {
    try {
      std::vector<int64_t>& enc = detail::scratch_encoding();
      enc.clear();
      enc.push_back(keyed);
      detail::Encoder encoder(enc);
      encode(encoder);
      uint64_t hash = detail::hash_encoding(enc);
      auto [known, slot] = recorder_->count(hash);
      if (!known || slot >= 0) recorder_->add(hash, known, build(slot >= 0), slot, keyed);
      return slot;
    } catch (const std::exception& e) {
      recorder_->add_error(e.what());
      return -1;
    }
  }

  template <class F>
  decltype(auto) invoke_and_record_output(int64_t slot, F&& f) {
    using R = decltype(f());
    if constexpr (std::is_void_v<R>) {
      f();
    } else {
      R out = f();
      if constexpr (is_recordable_v<std::decay_t<R>>) {
        if (slot >= 0) {
          try {
            recorder_->add_output(slot, to_value(out, true));
          } catch (const std::exception& e) {
            recorder_->add_error(e.what());
          }
        }
      }
      return out;
    }
  }

  template <class... Args>
  decltype(auto) invoke(Args&&... args) {
    if constexpr (detail::has_arrow_forward<Module>::value) return model_->forward(std::forward<Args>(args)...);
    else return std::invoke(model_, std::forward<Args>(args)...);
  }

  Module model_;
  // Behind a pointer so that an observer can be moved (the recorder holds a mutex).
  std::unique_ptr<detail::Recorder> recorder_;
};

}  // namespace optrace
