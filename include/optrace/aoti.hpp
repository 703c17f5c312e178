// optrace/aoti.hpp: AOTInductor packages (.pt2) loaded, guarded and verified against observed calls
#pragma once
// Needs libtorch >= 2.6 (torch::inductor::AOTIModelContainerRunner and its registry). How a call is flattened by the
// package's treespecs is detail/aoti/call_spec.hpp; the input guard, from the metadata that
// examples/python/compile_package.py stores, is detail/aoti/guard.hpp. docs/aoti.md walks the
// loop: observe, compile, load, verify, serve.

#include <optrace/detail/common/compat.hpp>
#if !OPTRACE_HAS_AOTI
#error "optrace/aoti.hpp needs libtorch >= 2.6 (AOTInductor's C++ runner)"
#endif

#include <optrace/detail/aoti/call_spec.hpp>
#include <optrace/detail/aoti/extract.hpp>
#include <optrace/detail/aoti/guard.hpp>
#include <optrace/detail/aoti/weights.hpp>
#include <optrace/detail/aoti/zip_names.hpp>
#include <optrace/detail/common/beneath.hpp>
#include <optrace/detail/common/error_text.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/observer/recorder.hpp>
#include <optrace/detail/replay/compare.hpp>
#include <optrace/dynamic_shapes.hpp>
#include <optrace/error.hpp>
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>
#include <optrace/materialize.hpp>
#include <optrace/observations.hpp>
#include <optrace/value.hpp>

#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/script.h>


#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace optrace::aoti {

/// Why a package does not take a call (Package::accepts): the message its call would throw, and
/// for a size outside the compiled range the argument, dim, value and range.
using Refusal = detail::aoti::Refusal;

/// How a package is loaded (Package, PackageSet::load).
///
/// Example:
///   optrace::aoti::Package pkg("p0.pt2", optrace::aoti::LoadOptions().runners(2).weights("plan/weights.pt"));
class LoadOptions {
 public:
  /// Calls the package runs at once: AOTInductor's runner holds this many models, sharing the
  /// weights; a call past them waits for one to be free. Default 1. Each model holds its own
  /// activations, so memory grows with it (docs/serve.md).
  LoadOptions& runners(int n) {
    OPTRACE_CHECK(n >= 1, ArgumentError, "LoadOptions::runners: need >= 1, got ", n);
    runners_ = n;
    return *this;
  }
  /// The weights file of a package compiled without its weights (compile_plan writes the plan's
  /// once, beside plan.json); PackageSet::load finds the plan's by itself. Read as given.
  LoadOptions& weights(std::string path) {
    weights_ = std::move(path);
    return *this;
  }
  /// The model in the package (AOTInductor's default: "model").
  LoadOptions& model_name(std::string name) {
    model_name_ = std::move(name);
    return *this;
  }
  /// What the setters above set (runners 1, no weights file, "model" by default).
  int runners() const { return runners_; }
  const std::string& weights() const { return weights_; }
  const std::string& model_name() const { return model_name_; }

 private:
  int runners_ = 1;
  std::string weights_, model_name_ = "model";
};

/// An AOTInductor package loaded for C++ calls: arguments flattened by the package's in_spec
/// (positional, keyword, nested tuples, lists and dicts, as the observer records them), every
/// input checked before it runs, outputs rebuilt by the out_spec. Copies share the loaded model;
/// any number of threads may call one package (up to LoadOptions::runners at once).
///
/// The check (detail/aoti/guard.hpp) follows torch's own rules for an exported program's inputs
/// and adds dtype and device; it needs the metadata that compile_package.py stores. A package
/// compiled without it still loads and runs: its arity and structure are checked, and
/// `unchecked()` says what is not.
///
/// Loading does what torch 2.6's AOTIModelPackageLoader does (detail/aoti/extract.hpp): the
/// archive's directory is checked as miniz reads it, the model's files extracted into a private
/// folder (removed with the package), and the runner AOTInductor registers for the package's
/// device built, with LoadOptions::runners models. A package compiled without its weights
/// (compile_plan) gets them from the file LoadOptions::weights names, every tensor checked
/// against what it was compiled for (detail/aoti/weights.hpp); it never runs without them.
///
/// Example:
///   optrace::aoti::Package pkg("model.pt2");
///   c10::IValue out = pkg(ids, mask);                         // as module.forward(ids, mask)
///   c10::IValue out2 = pkg.call({ids}, {{"attention_mask", mask}});
///   std::cout << pkg.dynamic_shapes().to_python();            // what it was compiled for
class Package {
 public:
  /// Loads the package at `path` (the model `model_name` in it). Throws IoError naming the file
  /// when it is missing, unreadable or not a package AOTInductor can load (compiled for another
  /// libtorch or machine: AOTInductor's own message follows), JsonError when its optrace
  /// metadata is malformed, ArgumentError for a package compiled without its weights.
  explicit Package(const std::string& path, const std::string& model_name = "model")
      : Package(path, LoadOptions().model_name(model_name)) {}
  /// Loads the package at `path` as `options` say; throws as above, and ArgumentError naming the
  /// weights file and the tensor when the weights do not fit the package (a missing tensor, or
  /// one of another dtype, shape or layout).
  Package(const std::string& path, const LoadOptions& options)
      : Package(open_package(path), path, options, weights_for(options)) {
    if (!options.weights().empty() && !shared_weights())
      detail::raise_about_file<ArgumentError>(path, "its weights are inside it: LoadOptions().weights('", options.weights(),
                                              "') is for a package compiled without them (compile_plan)");
  }

  /// The package a plan names: `file` beneath the plan's folder `dir` ("" is the working folder),
  /// opened as every file a plan names is (detail/common/beneath.hpp: no `..`, no symbolic link
  /// on the way or at the end), then loaded as by the path. `optrace verify PLAN` loads plans'
  /// packages with it; PackageSet does, with the plan's weights.
  static Package beneath(const std::string& dir, const std::string& file, const LoadOptions& options = {}) {
    return beneath(dir, file, options, weights_for(options));
  }

  /// Calls the package with positional arguments, as `module.forward(args...)`.
  template <class... Args>
  c10::IValue operator()(Args&&... args) {
    return call(std::vector<c10::IValue>{c10::IValue(std::forward<Args>(args))...}, {});
  }

  /// `call(args, kwargs)`: what InputObserver<Package>::call invokes.
  c10::IValue operator()(std::vector<c10::IValue> args, const std::unordered_map<std::string, c10::IValue>& kwargs) {
    return call(std::move(args), kwargs);
  }

  /// Calls the package with positional and keyword arguments (the observer's call shape).
  /// Throws ArgumentError for a call of another arity or structure, ShapeError for an input the
  /// package was not compiled for (argument, dim, value and the compiled range).
  c10::IValue call(std::vector<c10::IValue> args, const std::unordered_map<std::string, c10::IValue>& kwargs = {}) {
    std::vector<at::Tensor> inputs = prepare(args, kwargs);
    return outputs(run(inputs));
  }

  /// The tensors `run` takes for this call, after the checks `call` makes (for timing the raw
  /// run, or running it elsewhere).
  std::vector<at::Tensor> prepare(const std::vector<c10::IValue>& args,
                                  const std::unordered_map<std::string, c10::IValue>& kwargs = {}) const {
    std::vector<detail::aoti::FlatInput> flat = state_->check.shape.flatten(args, kwargs);
    if (state_->check.guarded) state_->check.guard.check(flat);
    return detail::aoti::Guard::tensors(flat);
  }
  /// Whether the package takes this call: the checks `call` makes, without throwing. Leaves the
  /// flat inputs in `flat`, and the reason for a refusal in `why` when given (null: no message
  /// is built). PackageSet routes calls with it.
  bool accepts(const std::vector<c10::IValue>& args, const std::unordered_map<std::string, c10::IValue>& kwargs,
               std::vector<detail::aoti::FlatInput>& flat, Refusal* why = nullptr) const {
    return state_->check.accepts(args, kwargs, flat, why);
  }
  /// Runs inputs that `accepts` took, and rebuilds the outputs.
  c10::IValue run_accepted(const std::vector<detail::aoti::FlatInput>& flat) {
    return outputs(run(detail::aoti::Guard::tensors(flat)));
  }
  /// AOTInductor's run on the flat tensors `prepare` gives, unchecked: its flat outputs.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& flat) { return state_->runner->run(flat); }
  /// The flat outputs of `run` rebuilt by the out_spec.
  c10::IValue outputs(const std::vector<at::Tensor>& flat) const { return detail::aoti::unflatten(state_->out_spec, flat); }

  /// What the package was compiled for: per argument its dims, dynamic ones by symbol with the
  /// exported ranges (`to_python()` prints them). Empty without optrace's metadata.
  const DynamicShapes& dynamic_shapes() const { return state_->dynamic_shapes; }
  /// The arguments in forward's order, as the observation file named them (`(x, *, mask)`).
  std::string signature() const { return state_->check.shape.describe(); }
  /// The argument names, positional ones first (InputObserver<Package> records by them).
  std::vector<std::string> argument_names() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < state_->check.shape.args.children.size(); ++i) out.push_back(state_->check.shape.positional_name(i));
    out.insert(out.end(), state_->check.shape.kwargs.keys.begin(), state_->check.shape.kwargs.keys.end());
    return out;
  }
  /// True when the package has optrace's guard metadata (dtype, sizes and ranges are checked).
  bool guarded() const { return state_->check.guarded; }
  /// What the guard cannot check, one sentence each (empty when it checks everything).
  const std::vector<std::string>& unchecked() const { return state_->check.guard.unchecked; }
  /// The package's metadata (AOTInductor's own keys and what compile_package stored).
  const std::unordered_map<std::string, std::string>& metadata() const { return state_->metadata; }
  /// The package's in_spec as its call spec holds it (torch's treespec text): the tree its calls'
  /// arguments are flattened by.
  const std::string& in_spec() const { return state_->in_spec; }
  /// The device it was compiled for: "cpu" or "cuda".
  const std::string& device() const { return state_->device; }
  const std::string& path() const { return state_->path; }
  /// Calls it runs at once (LoadOptions::runners).
  int runners() const { return state_->runners; }
  /// True when it was compiled without its weights (compile_plan): they come from a weights file.
  bool shared_weights() const { return state_->needs.has_value(); }
  /// The weights file it runs with ("" when its weights are inside it).
  std::string weights_path() const { return state_->weights ? state_->weights->path : std::string(); }
  /// AOTInductor's runner (its constants, its call spec).
  torch::inductor::AOTIModelContainerRunner& runner() { return *state_->runner; }

 private:
  friend class PackageSet;
  using WeightsPtr = std::shared_ptr<const detail::aoti::Weights>;

  // `beneath` with weights read already (a set's, once for all its packages); a package with its
  // weights inside ignores them.
  static Package beneath(const std::string& dir, const std::string& file, const LoadOptions& options, WeightsPtr weights) {
    return Package(detail::open_file_beneath(dir, file, "the package"), detail::beneath_shown(dir, file), options,
                   std::move(weights));
  }

  static WeightsPtr weights_for(const LoadOptions& options) {
    if (options.weights().empty()) return nullptr;
    size_t size = 0;
    const detail::Fd fd(detail::open_regular_file(options.weights(), &size));
    return detail::aoti::read_weights(fd.get(), options.weights());
  }

  // The package open at `file`, named `path` in messages: its archive checked, its model's files
  // extracted from that same descriptor (so what runs is what was checked, whatever is renamed
  // meanwhile), its runner built with `weights` when it was compiled without them.
  Package(detail::Fd file, const std::string& path, const LoadOptions& options, WeightsPtr weights)
      : state_(std::make_shared<State>()) {
    state_->path = path;
    state_->runners = options.runners();
    struct stat st {};
    if (::fstat(file.get(), &st) != 0) detail::raise_about_file<IoError>(path, "cannot open the package: ", std::strerror(errno));
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    std::vector<detail::aoti::ZipEntry> entries;
    const std::string prefix = check_archive(file.get(), size, path, options.model_name(), entries);
    auto folder = std::make_shared<detail::aoti::ExtractionFolder>();
    detail::aoti::ExtractedModel model;
    try {
      model = detail::aoti::extract_model(file.get(), size, entries, prefix, *folder, path);
    } catch (const Error& e) {
      detail::raise_about_file<IoError>(path, "cannot extract the package: ", e.message());
    }
    state_->folder = std::move(folder);
    state_->library = model.library;
    try {
      if (!model.metadata.empty()) state_->metadata = read_metadata(model.metadata);
      auto device = state_->metadata.find("AOTI_DEVICE_KEY");
      state_->device = device != state_->metadata.end() ? device->second : "cpu";
      auto needs = state_->metadata.find(std::string(detail::aoti::kWeightsKey));
      if (needs != state_->metadata.end()) state_->needs = detail::aoti::WeightsNeed::parse(needs->second);
    } catch (Error& e) {
      e.name_file(path);
      throw;
    }
    if (state_->needs && !weights)
      detail::raise_about_file<ArgumentError>(
          path, "compiled without its weights (compile_plan writes them once, as '", state_->needs->file,
          "' beside plan.json): give it them (LoadOptions().weights, optrace verify --weights), or load its plan "
          "(PackageSet::load, optrace verify PLAN)");
    start_runner(*state_, state_->needs ? std::move(weights) : nullptr);
    try {
      std::vector<std::string> spec = state_->runner->get_call_spec();
      if (spec.size() != 2) detail::raise_json("", "the package's call spec has ", spec.size(), " parts, not 2");
      auto found = state_->metadata.find(std::string(detail::aoti::kGuardKey));
      state_->in_spec = spec[0];
      state_->check = detail::aoti::CallCheck::of(spec[0], found != state_->metadata.end() ? &found->second : nullptr);
      state_->out_spec = detail::aoti::parse_tree_spec(spec[1]);
      if (state_->check.guarded) state_->dynamic_shapes = state_->check.guard.dynamic_shapes(state_->check.shape);
      else
        state_->check.guard.unchecked.push_back("the package has no optrace.guard metadata (not compiled with compile_package.py): "
                                                "only the number and structure of its inputs are checked");
    } catch (Error& e) {
      e.name_file(path);
      throw;
    }
  }

  struct State {
    std::string path, device, library;
    int runners = 1;
    std::shared_ptr<const detail::aoti::ExtractionFolder> folder;  // outlives the runner that loaded from it
    std::optional<detail::aoti::WeightsNeed> needs;                 // compiled without its weights
    WeightsPtr weights;                                             // held while the runner reads them
    std::shared_ptr<torch::inductor::AOTIModelContainerRunner> runner;  // this State's own (with_weights makes another)
    std::unordered_map<std::string, std::string> metadata;
    std::string in_spec;            // the call spec's, as text
    detail::aoti::CallCheck check;  // what it takes: its in_spec and guard
    detail::aoti::TreeSpec out_spec;
    DynamicShapes dynamic_shapes;
  };

  // The runner AOTInductor registers for the package's device (the loader's registry), with
  // `runners` models, given `weights` when the package was compiled without them. A runner gets
  // its weights once, before any call: libtorch 2.6 keeps the first tensor a name is given, and a
  // model run without them reads nothing it owns (it crashes).
  static void start_runner(State& s, WeightsPtr weights) {
    auto& registry = torch::inductor::getAOTIModelRunnerRegistry();
    auto make = registry.find(s.device);
    if (make == registry.end())
      detail::raise_about_file<IoError>(s.path, "compiled for the device '", s.device,
                                        "', for which this libtorch has no AOTInductor runner (built without it)");
    try {
      s.runner = create_runner(make->second, s.library, static_cast<size_t>(s.runners), s.device, s.folder->path());
    } catch (const std::exception& e) {
      detail::raise_about_file<IoError>(s.path, "AOTInductor cannot load it as a package: ", detail::first_line(e));
    }
    if (!s.needs) return;
    std::unordered_map<std::string, at::Tensor> tensors = detail::aoti::check_weights(
        *weights, *s.needs, s.runner->getConstantNamesToOriginalFQNs(), s.path, c10::Device(s.device));
    torch::inductor::TensorConstantMap constants;
    for (auto& [name, tensor] : tensors) constants.emplace(name, new at::Tensor(tensor));  // the runner owns them
    try {
      s.runner->update_constant_buffer(constants, /*use_inactive=*/false, /*validate_full_updates=*/true);
    } catch (const std::exception& e) {
      detail::raise_about_file<IoError>(s.path, "AOTInductor refused the weights of '", weights->path, "': ", detail::first_line(e));
    }
    s.weights = std::move(weights);
  }

  // The registry's create function: (library, models, device, folder) in libtorch 2.6; newer ones
  // add `run_single_threaded` (false: what their loader passes by default).
  template <class Create>
  static std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create_runner(Create create, const std::string& library,
                                                                                  size_t models, const std::string& device,
                                                                                  const std::string& folder) {
    if constexpr (std::is_invocable_v<Create, const std::string&, size_t, const std::string&, const std::string&>)
      return create(library, models, device, folder);
    else
      return create(library, models, device, folder, false);
  }

  // This package with other weights (of the same names, dtypes and shapes): a new runner on the
  // same extracted library, the rest shared. PackageSet::replace_weights builds every package's
  // before it swaps any in.
  Package with_weights(WeightsPtr weights) const {
    auto s = std::make_shared<State>(*state_);
    start_runner(*s, std::move(weights));  // replaces the runner and the weights copied
    Package p(*this);
    p.state_ = std::move(s);
    return p;
  }

  // AOTInductor's metadata file: a JSON object of strings (what the loader's load_metadata reads).
  static std::unordered_map<std::string, std::string> read_metadata(const std::string& file) {
    std::unordered_map<std::string, std::string> out;
    auto doc = json::Document::load(file);
    for (auto [key, value] : doc->root().object()) out.emplace(std::string(key), std::string(value.as_string()));
    return out;
  }

  // The regular file at `path`, open (a folder, FIFO or device refused without blocking).
  static detail::Fd open_package(const std::string& path) {
    detail::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd) detail::raise_about_file<IoError>(path, "cannot open the package: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      detail::raise_about_file<IoError>(path, "cannot open the package: not a regular file");
    return fd;
  }

  // A package is a zip archive with the model's files under data/aotinductor/<model_name>/, in
  // the archive's top folder where torch 2.7 and newer put them (archive_prefix). Leaves the
  // archive's entries in `entries`; returns the model's folder in the archive.
  static std::string check_archive(int fd, uint64_t size, const std::string& path, const std::string& model_name,
                                   std::vector<detail::aoti::ZipEntry>& entries) {
    std::vector<std::string> names;
    try {
      entries = detail::aoti::zip_entries_of(fd, size, path);
    } catch (const Error& e) {
      detail::raise_about_file<IoError>(path, "not an AOTInductor package: ", e.message());
    }
    for (const detail::aoti::ZipEntry& e : entries) names.push_back(e.name);
    if (const std::optional<std::string> bad = detail::aoti::unsafe_entry_name(names))
      detail::raise_about_file<IoError>(path, "not a safe AOTInductor package: the archive entry '", *bad,
                                        "' would be extracted outside the loader's folder (an absolute path, a '..' "
                                        "component or a NUL); refused before extracting anything");
    std::string top = detail::aoti::archive_prefix(names);
#if OPTRACE_TORCH_VERSION < 20700
    // torch 2.6's loader looks for data/aotinductor/ at the root only, and refuses a package
    // whose files are under a top folder (its library was built for a newer runtime anyway).
    if (!top.empty())
      for (const std::string& n : names)
        if (n.rfind(top + "data/aotinductor/" + model_name + "/", 0) == 0)
          detail::raise_about_file<IoError>(path, "a package in the layout of torch 2.7 and newer (its files under '", top,
                                            "'), which the AOTInductor loader of libtorch ", TORCH_VERSION,
                                            " cannot read: compile it with torch ", TORCH_VERSION,
                                            ", or load it with libtorch 2.7 or newer");
    top.clear();
#endif
    const std::string prefix = top + "data/aotinductor/" + model_name + "/";
    bool has_model = false, has_library = false;
    for (const std::string& n : names) {
      if (n.rfind(prefix, 0) != 0) continue;
      has_model = true;
      has_library |= n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0;
    }
    if (!has_model) {
      std::string some;
      for (size_t i = 0; i < names.size() && i < 4; ++i) some += (i ? ", " : "") + names[i];
      detail::raise_about_file<IoError>(path, "not an AOTInductor package: a zip archive without ", prefix,
                                        " (it holds ", names.size(), " files: ", some, names.size() > 4 ? ", ..." : "", ")");
    }
    if (!has_library)
      detail::raise_about_file<IoError>(path, "not an AOTInductor package for this machine: no compiled model (.so) under ",
                                        prefix);
    return prefix;
  }

  std::shared_ptr<State> state_;
};

// ---- verify ---------------------------------------------------------------------------------

/// How `verify` runs each observed signature.
struct VerifyOptions {
  /// Where the inputs are built and both models run. Default: the package's device.
  VerifyOptions& device(c10::Device d) {
    device_ = d;
    return *this;
  }
  /// How the inputs are built from the recorded specs: seed, float fill, integer range
  /// (materialize.hpp; its device is replaced by `device()`). By default an integer input is
  /// drawn within the values the observation file recorded for it (the observer keeps them for
  /// the calls it stores), else in [0, 8); `int_range` overrides both.
  VerifyOptions& inputs(MaterializeOptions m) {
    inputs_ = std::move(m);
    return *this;
  }
  /// Timed runs per signature and model after one warm-up; the median is reported. 0: no timing.
  /// Default 5.
  VerifyOptions& timed_runs(int n) {
    OPTRACE_CHECK(n >= 0, ArgumentError, "VerifyOptions::timed_runs: need >= 0, got ", n);
    runs_ = n;
    return *this;
  }
  /// Tolerances as replay's check mode (ReplayOptions::atol/rtol); default by dtype.
  VerifyOptions& atol(double a) {
    OPTRACE_CHECK(a >= 0, ArgumentError, "VerifyOptions::atol: need >= 0, got ", a);
    atol_ = a;
    return *this;
  }
  /// The relative tolerance, as ReplayOptions::rtol; default by dtype.
  VerifyOptions& rtol(double r) {
    OPTRACE_CHECK(r >= 0, ArgumentError, "VerifyOptions::rtol: need >= 0, got ", r);
    rtol_ = r;
    return *this;
  }
  /// What the setters above set (none where a default by dtype or by package applies).
  std::optional<c10::Device> device() const { return device_; }
  const MaterializeOptions& inputs() const { return inputs_; }
  int timed_runs() const { return runs_; }
  std::optional<double> atol() const { return atol_; }
  std::optional<double> rtol() const { return rtol_; }

 private:
  std::optional<c10::Device> device_;
  MaterializeOptions inputs_;
  int runs_ = 5;
  std::optional<double> atol_, rtol_;
};

enum class VerifyStatus {
  ok,        ///< ran; outputs agree with the reference (or, without one, it ran)
  mismatch,  ///< ran; outputs differ beyond the tolerance
  refused,   ///< the guard refused the inputs: the package was not compiled for them
  error,     ///< the package or the reference failed
};

inline const char* to_string(VerifyStatus s) {
  switch (s) {
    case VerifyStatus::ok: return "ok";
    case VerifyStatus::mismatch: return "mismatch";
    case VerifyStatus::refused: return "refused";
    case VerifyStatus::error: return "error";
  }
  return "?";
}

/// One observed signature verified.
struct VerifyResult {
  int64_t index = 0;      ///< in the observation file's history
  std::string arguments;  ///< `dict(x: float32[4, 8], mask: float32[4, 8])`
  int64_t calls = 0;      ///< calls the observer recorded with it
  VerifyStatus status = VerifyStatus::ok;
  std::string message;    ///< why, for anything but ok
  double max_abs = 0, max_rel = 0;
  std::optional<double> package_ms, reference_ms;  ///< median per call
};

/// What `verify` found.
struct VerifyReport {
  std::vector<VerifyResult> results;
  std::string device;
  bool with_reference = false;

  /// The signatures with status `s`.
  int64_t num(VerifyStatus s) const {
    return std::count_if(results.begin(), results.end(), [s](const VerifyResult& r) { return r.status == s; });
  }
  /// Every signature ok (none refused, mismatched or failed).
  bool all_ok() const { return num(VerifyStatus::ok) == static_cast<int64_t>(results.size()); }
  /// "5 ok, 0 mismatch, 1 refused, 0 error (6 signatures, 42 calls, on cpu, against the reference)"
  std::string summary() const {
    int64_t calls = 0;
    for (const VerifyResult& r : results) calls += r.calls;
    return detail::concat(num(VerifyStatus::ok), " ok, ", num(VerifyStatus::mismatch), " mismatch, ",
                          num(VerifyStatus::refused), " refused, ", num(VerifyStatus::error), " error (",
                          results.size(), " signatures, ", calls, " calls, on ", device,
                          with_reference ? ", against the reference)" : ", no reference: each signature runs)");
  }
  /// One line per signature: status, calls, times, arguments, and the reason.
  std::string table() const {
    std::ostringstream out;
    for (const VerifyResult& r : results) {
      out << "  #" << r.index << " " << to_string(r.status) << "  " << r.calls << " calls  " << r.arguments;
      if (r.package_ms) out << "  package " << detail::number_string(*r.package_ms) << " ms";
      if (r.reference_ms) out << ", reference " << detail::number_string(*r.reference_ms) << " ms";
      if (r.status == VerifyStatus::ok && with_reference)
        out << "  max abs " << detail::number_string(r.max_abs) << ", max rel " << detail::number_string(r.max_rel);
      if (!r.message.empty()) out << "\n      " << r.message;
      out << "\n";
    }
    return out.str();
  }
  /// The report as `optrace verify --json` writes it (docs/aoti.md, "verify").
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object().key("device").value(device).key("with_reference").value(with_reference);
    w.key("ok").value(num(VerifyStatus::ok)).key("mismatch").value(num(VerifyStatus::mismatch));
    w.key("refused").value(num(VerifyStatus::refused)).key("error").value(num(VerifyStatus::error));
    w.key("signatures").begin_array();
    for (const VerifyResult& r : results) {
      w.begin_object().key("index").value(r.index).key("arguments").value(r.arguments).key("calls").value(r.calls);
      w.key("status").value(to_string(r.status)).key("message").value(r.message);
      w.key("max_abs").value(r.max_abs).key("max_rel").value(r.max_rel);
      w.key("package_ms");
      r.package_ms ? w.value(*r.package_ms) : w.null();
      w.key("reference_ms");
      r.reference_ms ? w.value(*r.reference_ms) : w.null();
      w.end_object();
    }
    w.end_array().end_object();
    return w.take();
  }
};

}  // namespace optrace::aoti

namespace optrace::detail::aoti {

using Kwargs = std::unordered_map<std::string, c10::IValue>;

inline std::pair<std::vector<c10::IValue>, Kwargs> split(const Arguments& a) {
  Kwargs kwargs;
  for (const auto& item : a.kwargs) kwargs.emplace(item.key(), item.value());
  return {a.args, std::move(kwargs)};
}

// A C++ module's typed forward (a TORCH_MODULE holder or a shared_ptr to an nn::Module
// subclass, as InputObserver takes): the call's IValues put in forward's order (positional ones
// first, keyword ones by `names`, forward's argument names as the observation file has them),
// each converted to its parameter's type (IValue::to).
template <class T>
struct forward_signature;
template <class C, class R, class... A>
struct forward_signature<R (C::*)(A...)> {
  using args = std::tuple<std::decay_t<A>...>;
};
template <class C, class R, class... A>
struct forward_signature<R (C::*)(A...) const> : forward_signature<R (C::*)(A...)> {};

template <class Module, class Args, size_t... I>
c10::IValue call_forward_with(Module& m, std::vector<c10::IValue>& ordered, std::index_sequence<I...>) {
  return c10::IValue(m->forward(std::move(ordered[I]).template to<std::tuple_element_t<I, Args>>()...));
}

template <class Module>
c10::IValue call_forward(Module& m, const std::vector<c10::IValue>& args, const Kwargs& kwargs,
                         const std::vector<std::string>& names) {
  using Impl = std::decay_t<decltype(*m)>;
  using Args = typename forward_signature<decltype(&Impl::forward)>::args;
  constexpr size_t n = std::tuple_size_v<Args>;
  if (args.size() > n) raise<ArgumentError>("the reference's forward takes ", n, " arguments; the call gives ", args.size());
  std::vector<c10::IValue> ordered(n);
  for (size_t i = 0; i < args.size(); ++i) ordered[i] = args[i];
  for (const auto& [name, value] : kwargs) {
    auto at = std::find(names.begin(), names.end(), name);
    if (at == names.end() || static_cast<size_t>(at - names.begin()) >= n)
      raise<ArgumentError>("the reference's forward has no argument '", name, "' (the observed names: ", names.size(), ")");
    ordered[static_cast<size_t>(at - names.begin())] = value;
  }
  return call_forward_with<Module, Args>(m, ordered, std::make_index_sequence<n>{});
}

template <class F>
double median_ms(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class Reference>
optrace::aoti::VerifyReport verify_impl(optrace::aoti::Package& pkg, const Observations& obs, Reference* reference,
                                         const optrace::aoti::VerifyOptions& options) {
  using namespace optrace::aoti;
  VerifyReport report;
  c10::Device device = options.device().value_or(c10::Device(pkg.device()));
  report.device = device.str();
  report.with_reference = reference != nullptr;
  auto history = obs.history();
  const std::vector<std::string> names = pkg.argument_names();
  c10::InferenceMode inference;
  for (size_t k = 0; k < history.size(); ++k) {
    VerifyResult r;
    r.index = static_cast<int64_t>(k);
    r.calls = history[k].second;
    Arguments arguments;
    try {
      arguments = obs.materialize_signature(k, MaterializeOptions(options.inputs()).device(device));
      r.arguments = arguments.describe();
    } catch (const std::exception& e) {
      r.status = VerifyStatus::error;
      r.message = std::string("cannot build its inputs: ") + detail::describe_exception(e);
      report.results.push_back(std::move(r));
      continue;
    }
    auto [args, kwargs] = split(arguments);
    std::vector<at::Tensor> flat;
    try {
      flat = pkg.prepare(args, kwargs);
    } catch (const ArgumentError& e) {
      r.status = VerifyStatus::refused;
      r.message = e.what_without_prefix();
    } catch (const ShapeError& e) {
      r.status = VerifyStatus::refused;
      r.message = e.what_without_prefix();
    }
    if (r.status == VerifyStatus::refused) {
      report.results.push_back(std::move(r));
      continue;
    }
    c10::IValue got, want;
    const char* stage = "the package";
    try {
      got = pkg.outputs(pkg.run(flat));
      if (options.timed_runs() > 0) r.package_ms = median_ms(options.timed_runs(), [&] { pkg.run(flat); });
      if (reference) {
        stage = "the reference";
        auto run_reference = [&]() -> c10::IValue {
          if constexpr (std::is_same_v<Reference, torch::jit::Module>) return reference->forward(args, kwargs);
          else if constexpr (has_arrow_forward<Reference>::value) return call_forward(*reference, args, kwargs, names);
          else return c10::IValue((*reference)(args, kwargs));
        };
        want = run_reference();
        if (options.timed_runs() > 0) r.reference_ms = median_ms(options.timed_runs(), run_reference);
      }
    } catch (const std::exception& e) {
      r.status = VerifyStatus::error;
      r.message = std::string(stage) + " failed: " + detail::describe_exception(e);
      report.results.push_back(std::move(r));
      continue;
    }
    if (reference) {
      Comparison c;
      c.atol = options.atol();
      c.rtol = options.rtol();
      c.exact_dtypes = true;
      compare_values(got, want, "output", c);
      r.max_abs = c.max_abs;
      r.max_rel = c.max_rel;
      if (!c.ok) {
        r.status = VerifyStatus::mismatch;
        r.message = c.message;
      }
    }
    report.results.push_back(std::move(r));
  }
  return report;
}

}  // namespace optrace::detail::aoti

namespace optrace::aoti {

/// Runs every signature in the observation file's history through the package and through
/// `reference` (a torch::jit::Module; a TORCH_MODULE holder or shared_ptr to an nn::Module
/// subclass, whose typed forward gets the arguments in its order, keyword ones placed by the
/// package's argument names; or any callable taking (std::vector<c10::IValue>,
/// std::unordered_map<std::string, c10::IValue>) and returning what forward does), on inputs
/// materialized from the recorded specs, and compares the outputs with replay's check-mode
/// tolerance. A signature the guard refuses is `refused`: the package must be exported with
/// wider ranges (or the argument) to serve it.
template <class Reference, class = std::enable_if_t<!std::is_same_v<std::decay_t<Reference>, VerifyOptions>>>
VerifyReport verify(Package& pkg, const Observations& observations, Reference& reference, const VerifyOptions& options = {}) {
  return detail::aoti::verify_impl(pkg, observations, &reference, options);
}

/// `verify` without a reference: checks that every observed signature passes the guard and runs.
inline VerifyReport verify(Package& pkg, const Observations& observations, const VerifyOptions& options = {}) {
  return detail::aoti::verify_impl<torch::jit::Module>(pkg, observations, nullptr, options);
}

}  // namespace optrace::aoti
