// optrace/observations.hpp: Observations, an observation file loaded back: what an InputObserver saw, without the data
#pragma once
// The file's format is described in docs/observer.md ("Observation files"); its writer and reader are
// detail/observer/observation_file.hpp. `InputObserver::save` writes it.

#include <optrace/detail/common/io.hpp>
#include <optrace/detail/observer/analysis.hpp>
#include <optrace/detail/observer/call_set.hpp>
#include <optrace/detail/observer/observation_file.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/materialize.hpp>
#include <optrace/value.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace {

class Plan;
class Observations;
namespace detail {
const CallSet& call_set_of(const Observations& observations);
}

/// The observation file's format version. A reader accepts any minor version of its major
/// version (newer minors only add fields) and refuses a newer major version.
inline constexpr int64_t kObservationsMajorVersion = detail::kObservationsMajor;
inline constexpr int64_t kObservationsMinorVersion = detail::kObservationsMinor;

/// An observation file loaded back: answers infer_dynamic_shapes() and infer_arguments() as
/// the observer did, and builds export arguments of the same shapes, dtypes and strides on any
/// device, without the data.
///
/// Example:
///   optrace::Observations obs = optrace::load_observations("observations.json");
///   optrace::Arguments a = obs.materialize(optrace::MaterializeOptions().device(torch::kCUDA));
class Observations {
 public:
  /// No calls (what a default PlannedPackage holds until it is planned or loaded).
  Observations() = default;
  /// Parses an observation file's text. Throws JsonError naming the path and the bad value
  /// (wrong types, negative sizes, sizes and strides of different rank, an unknown dtype or
  /// layout number, a newer major version, malformed or truncated JSON).
  static Observations from_json(std::string_view text) { return Observations(detail::read_observations(text)); }

  /// Loads the observation file at `path`. Throws IoError if it cannot be read, JsonError as
  /// `from_json`; either names the file (`Error::file()`).
  static Observations load(const std::string& path) {
    return detail::about_file(path, [&] { return from_json(detail::read_file(path)); });
  }

  /// As InputObserver::infer_dynamic_shapes.
  DynamicShapes infer_dynamic_shapes(const DynamicShapesOptions& options = {}) const {
    return detail::infer_dynamic_shapes(*calls_, options);
  }
  /// As InputObserver::infer_arguments, with tensors on the meta device (shapes, dtypes and
  /// strides, no memory); `materialize` gives real ones.
  Arguments infer_arguments(const InferArgumentsOptions& options = {}) const {
    return materialize(MaterializeOptions().device(c10::Device(c10::kMeta)), options);
  }
  /// The export arguments of `infer_arguments(choice)`, with tensors allocated and filled on
  /// `options.device()` from `options.seed()`. An integer input (int8 to int64, uint8) takes
  /// values in the [min, max] the file records for it (1.2 files), unless `options` sets
  /// `int_range`. Throws what infer_arguments throws, and MaterializeError (unsupported dtype,
  /// over the memory budget: refused before allocating).
  Arguments materialize(const MaterializeOptions& options = {}, const InferArgumentsOptions& choice = {}) const {
    // Inputs the chosen call lacks come back synthesized on meta (empty or zeros, see
    // infer_arguments); they are allocated here, after the budget check, with the others.
    Value call = detail::infer_argument_value(*calls_, choice, c10::Device(c10::kMeta), detail::zeros_of_spec);
    std::vector<std::pair<Value*, std::string>> recorded;
    std::vector<Value*> synthesized;
    detail::for_each_tensor_leaf(call, [&](const std::string& name, Value& v) {
      if (v.data.defined()) synthesized.push_back(&v);
      else recorded.emplace_back(&v, name);
    });
    std::vector<TensorSpec> specs;
    for (const auto& [v, name] : recorded) specs.push_back(v->spec);
    for (Value* v : synthesized) specs.push_back(TensorSpec::of(v->data));
    Materializer materializer(options);
    materializer.check_budget(specs);
    uint64_t stream = 0;
    for (const auto& [v, name] : recorded) v->data = leaf_tensor(materializer, name, v->spec, stream++);
    for (Value* v : synthesized) v->data = at::zeros(v->data.sizes(), v->data.options().device(options.device()));
    return detail::to_arguments(*calls_, call);
  }

  /// `infer_arguments(choice).describe()`, with every tensor on the meta device, from the specs
  /// alone: builds no tensor (the optrace front end, which has no libtorch, shows it).
  std::string describe_arguments(const InferArgumentsOptions& choice = {}) const {
    const c10::Device meta(c10::kMeta);
    return detail::describe_arguments(calls_->keyed, detail::infer_argument_value(*calls_, choice, meta, nullptr), meta);
  }

  /// Number of stored calls.
  int64_t num_obs() const { return static_cast<int64_t>(calls_->stored.size()); }
  /// Number of calls the observer recorded.
  int64_t num_calls() const { return calls_->total_calls; }
  /// Every distinct call signature with its number of calls.
  std::vector<std::pair<Value, int64_t>> history() const {
    std::vector<std::pair<Value, int64_t>> out;
    for (size_t k = 0; k < calls_->signatures.size(); ++k) out.emplace_back(calls_->signatures[k], calls_->counts[k]);
    return out;
  }
  /// The arguments of history signature `index` (`history()[index]`), with tensors of its
  /// recorded specs allocated and filled on `options.device()` from `options.seed()` (a stream
  /// per signature: the same index gives the same values), integers as `materialize` draws
  /// them. Arguments the call did not pass are left out, as the call had them. Throws
  /// ArgumentError for an index out of range, and MaterializeError as `materialize`.
  Arguments materialize_signature(size_t index, const MaterializeOptions& options = {}) const {
    OPTRACE_CHECK(index < calls_->signatures.size(), ArgumentError, "no history signature ", index, " (there are ",
                  calls_->signatures.size(), ")");
    Value call = calls_->signatures[index];
    std::vector<std::pair<Value*, std::string>> tensors;
    detail::for_each_tensor_leaf(call, [&](const std::string& name, Value& v) { tensors.emplace_back(&v, name); });
    std::vector<TensorSpec> specs;
    for (const auto& [v, name] : tensors) specs.push_back(v->spec);
    Materializer materializer(options);
    materializer.check_budget(specs);
    uint64_t stream = static_cast<uint64_t>(index) << 16;
    for (const auto& [v, name] : tensors) v->data = leaf_tensor(materializer, name, v->spec, stream++);
    return detail::to_arguments(*calls_, call);
  }

  /// The same file again (a round trip gives the same text).
  std::string to_json(int indent = 1) const { return detail::observations_json(*calls_, indent); }
  /// Writes `to_json()` to `path` atomically. Throws IoError.
  void save(const std::string& path) const { detail::write_file_atomic(path, to_json() + "\n"); }

 private:
  // Input leaf `name`'s tensor: integers within the values the file records for it (clamped to
  // the dtype), unless the options set int_range or the file records none.
  at::Tensor leaf_tensor(Materializer& materializer, const std::string& name, const TensorSpec& spec,
                         uint64_t stream) const {
    auto range = calls_->int_ranges.find(name);
    if (materializer.options().int_range_set() || range == calls_->int_ranges.end() || !detail::has_int_range(spec.dtype))
      return materializer.tensor(spec, stream);
    const auto [low, high] = detail::observed_fill_range(spec.dtype, range->second);
    return materializer.tensor(spec, stream, low, high);
  }

  explicit Observations(detail::CallSet calls) : calls_(std::make_shared<const detail::CallSet>(std::move(calls))) {}

  friend class Plan;  // plan.hpp groups the calls of several files into packages
  friend const detail::CallSet& detail::call_set_of(const Observations&);
  // Never changed once made, so copies share it: the packages of a plan that name one file hold
  // one copy of its calls (Plan::load), however many packages name it.
  std::shared_ptr<const detail::CallSet> calls_ = std::make_shared<const detail::CallSet>();
};

/// The calls an Observations holds; copies of one Observations hold the same (tests check it).
inline const detail::CallSet& detail::call_set_of(const Observations& observations) { return *observations.calls_; }

/// Loads an observation file (`Observations::load`).
inline Observations load_observations(const std::string& path) { return Observations::load(path); }

}  // namespace optrace
