// optrace/serve.hpp: a plan's AOTInductor packages served together: calls routed by their guards, refusals counted as drift, the set replaced under load
#pragma once
// Needs libtorch >= 2.6 (aoti.hpp). The plan (plan.hpp) says which packages cover which calls;
// examples/python/compile_package.py's compile_plan compiles them into the plan's folder.
// docs/serve.md walks the loop: observe, plan, compile, serve, watch the drift, replace.
//
// Concurrency: the loaded packages are one immutable State behind a shared_ptr that a call
// copies (std::atomic_load) and `replace` swaps (std::atomic_exchange). A call in flight finishes
// on the State it started with; the replacing thread waits for those calls and destroys the
// replaced State itself (or, past kRetireWait, keeps it in `retired` for a later replace or the
// set's end), so never on a request thread. `replace_weights` swaps a State of new runners the
// same way. Loading happens
// before `replace`, on the thread that loads. Counters are atomics; refusals, the rare path, take
// a mutex.

#include <optrace/aoti.hpp>
#include <optrace/plan.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace optrace::aoti {

/// What a PackageSet served, since it was loaded: calls per package (those of replaced sets
/// too), calls to the fallback, calls refused, and every refusal aggregated by argument and dim
/// with the sizes seen and the range of the closest package: the drift an operator recompiles for.
struct ServeStats {
  struct PackageCalls {
    std::string name, file;
    std::string plan;      ///< the id of the plan it came from (Plan::id; empty for a plan without one)
    int64_t calls = 0;     ///< by every package of that name and file the set served with
    bool current = false;  ///< one of them is in the set now (false: replaced by other names)
  };
  /// Calls that no package took, by why the closest package refused them.
  struct Refusals {
    std::string argument;  ///< the input at fault; empty for a call of another structure
    int64_t dim = -1;      ///< the dim outside its range; -1 for anything else (a None, a dtype, an arity)
    int64_t calls = 0;
    int64_t seen_min = 0, seen_max = 0;            ///< the sizes of that dim in those calls
    std::optional<int64_t> planned_min, planned_max;  ///< the closest package's range there
    bool shape = false;    ///< a ShapeError (a size, a dtype, a device, a None); else an ArgumentError (the structure)
    std::string package;   ///< the closest package: same structure, then fewest dims outside (drift's choice)
    std::string plan;      ///< the id of the plan that package came from
    std::string message;   ///< its guard's message for the first such call (rows are keyed by the fields above,
                           ///< never by the caller's data; past kMaxRefusalRows kinds, one "(other)" row counts the rest)
  };
  int64_t calls = 0, fallbacks = 0, refused = 0, replacements = 0;
  /// Replaced sets still in memory because calls ran on them past PackageSet::kRetireWait: the
  /// next replace frees those no call holds any more, or the set's end does (never a request thread).
  int64_t retired = 0;
  std::string plan;  ///< the id of the plan served now
  std::vector<PackageCalls> packages;
  std::vector<Refusals> refusals;  ///< most calls first

  /// `120 calls: p0 80, p1 30, fallback 10, refused 0`, then one line per refusal; a package of
  /// another plan than the one served now is named with its plan (`p0 (replaced, plan 3f…) 80`).
  std::string to_string() const {
    std::ostringstream out;
    // "plan 3f…" for a row of another plan than the one served now, else "".
    auto other_plan = [&](const std::string& id) { return id.empty() || id == plan ? std::string() : "plan " + id; };
    out << calls << " calls:";
    for (const PackageCalls& p : packages) {
      const std::string other = other_plan(p.plan);
      out << " " << p.name << (p.current ? "" : " (replaced" + (other.empty() ? "" : ", " + other) + ")") << " " << p.calls << ",";
    }
    out << " fallback " << fallbacks << ", refused " << refused << "\n";
    for (const Refusals& r : refusals) {
      const std::string other = other_plan(r.plan);
      out << "  " << r.calls << " calls refused by " << r.package << (other.empty() ? "" : " (" + other + ")") << ": ";
      if (r.dim >= 0) {
        out << r.argument << " dim " << r.dim << " at " << r.seen_min;
        if (r.seen_max != r.seen_min) out << ".." << r.seen_max;
        out << ", compiled for [" << (r.planned_min ? std::to_string(*r.planned_min) : "0") << ", "
            << (r.planned_max ? std::to_string(*r.planned_max) : "inf") << "]\n";
      } else {
        out << r.message << "\n";
      }
    }
    return out.str();
  }

  /// The fields above as JSON (docs/serve.md, "Stats: the drift, live"; serve_set's stats.json).
  std::string to_json(int indent = 1) const {
    json::Writer w(indent);
    w.begin_object().key("calls").value(calls).key("fallbacks").value(fallbacks).key("refused").value(refused);
    w.key("replacements").value(replacements).key("retired").value(retired).key("plan").value(plan);
    w.key("packages").begin_array();
    for (const PackageCalls& p : packages)
      w.begin_object().key("name").value(p.name).key("file").value(p.file).key("plan").value(p.plan).key("calls").value(p.calls)
          .key("current").value(p.current).end_object();
    w.end_array().key("refusals").begin_array();
    for (const Refusals& r : refusals) {
      w.begin_object().key("argument").value(r.argument).key("dim").value(r.dim).key("calls").value(r.calls);
      w.key("seen").begin_array().value(r.seen_min).value(r.seen_max).end_array();
      w.key("planned").begin_array();
      r.planned_min ? w.value(*r.planned_min) : w.null();
      r.planned_max ? w.value(*r.planned_max) : w.null();
      w.end_array().key("package").value(r.package).key("plan").value(r.plan).key("message").value(r.message).end_object();
    }
    w.end_array().end_object();
    return w.take();
  }
};

/// The packages of a plan, served as one model: each call goes to the package whose guard takes
/// it, else to the fallback, else fails with the closest package's guard error. Any number of
/// threads may call at once; `replace` swaps in another set while they do. Copies share the set.
///
/// Example:
///   optrace::aoti::PackageSet set = optrace::aoti::PackageSet::load("plan");  // plan/plan.json and its packages
///   set.fallback(module);                                // the TorchScript module served before
///   c10::IValue out = set.call({}, {{"input_ids", ids}});
///   std::cout << set.stats().to_string();                // calls per package, fallbacks, refusals by dim
///   set.replace(optrace::aoti::PackageSet::load("plan2"));  // from another thread, under load
class PackageSet {
 public:
  using Kwargs = std::unordered_map<std::string, c10::IValue>;
  using Fallback = std::function<c10::IValue(std::vector<c10::IValue>, const Kwargs&)>;

  /// Loads the plan (`DIR/plan.json` or `DIR`) and every package it names, from its folder, as
  /// `options` say (LoadOptions::runners: calls each package runs at once). A package compiled
  /// for another plan (its metadata's "optrace.plan" is not the plan's id) is refused. Packages compiled
  /// without their weights (compile_plan) share one copy, read once from the plan's weights file
  /// (`weights.pt` beside plan.json, or LoadOptions::weights).
  /// Every file the plan names is opened beneath its folder (Package::beneath, Plan::load).
  /// Throws, naming the file, what Plan::load and
  /// Package throw (a missing or unloadable package, a path outside the folder or through a
  /// link, weights that do not fit), and ArgumentError when the packages disagree on the
  /// arguments or one was compiled for another plan. Nothing is kept of a set that fails to load.
  static PackageSet load(const std::string& plan_path, const LoadOptions& options = {}) {
    auto state = std::make_shared<State>();
    state->plan = Plan::load(plan_path);
    const std::string dir = std::filesystem::path(state->plan.path()).parent_path().string();
    state->weights = options.weights().empty() ? plan_weights(dir) : Package::weights_for(options);
    for (const PlannedPackage& p : state->plan.packages()) {
      state->entries.push_back({p.name, p.file, Package::beneath(dir, p.file, options, state->weights),
                                std::make_shared<std::atomic<int64_t>>(0)});
      check_plan_of(state->plan, state->entries.back());
    }
    if (!shares_weights(*state)) state->weights = nullptr;  // a plan compiled with the weights inside each package: nothing reads them
    const Entry& first = state->entries.front();
    for (const Entry& e : state->entries)
      if (!same_arguments(e.package, first.package))
        detail::raise_about_file<ArgumentError>(state->plan.path(), "the packages disagree on the arguments: ", e.name, " (",
                                                e.file, ") takes ", e.package.signature(), ", ", first.name, " (", first.file,
                                                ") takes ", first.package.signature());
    for (size_t i = 0; i < state->entries.size(); ++i) check_recorded_guard(state->plan, state->plan.packages()[i], state->entries[i]);
    PackageSet set;
    set.shared_->state = state;
    set.register_counters(*state);
    return set;
  }

  /// Serves the calls no package takes: a torch::jit::Module, a TORCH_MODULE holder (or
  /// shared_ptr to an nn::Module subclass) whose typed forward gets the arguments in the
  /// packages' order, or any callable taking (std::vector<c10::IValue>, Kwargs). What it
  /// throws reaches the caller unchanged.
  template <class Model>
  PackageSet& fallback(Model model) {
    Fallback f;
    if constexpr (std::is_same_v<std::decay_t<Model>, torch::jit::Module>) {
      f = [m = std::move(model)](std::vector<c10::IValue> args, const Kwargs& kwargs) mutable {
        return m.forward(std::move(args), kwargs);
      };
    } else if constexpr (detail::has_arrow_forward<Model>::value) {
      f = [m = std::move(model), names = argument_names()](std::vector<c10::IValue> args, const Kwargs& kwargs) mutable {
        return detail::aoti::call_forward(m, args, kwargs, names);
      };
    } else {
      f = [m = std::move(model)](std::vector<c10::IValue> args, const Kwargs& kwargs) mutable {
        return c10::IValue(m(std::move(args), kwargs));
      };
    }
    std::atomic_store(&shared_->fallback, std::make_shared<const Fallback>(std::move(f)));
    return *this;
  }

  /// Calls with positional arguments, as `module.forward(args...)`.
  template <class... Args>
  c10::IValue operator()(Args&&... args) {
    return call(std::vector<c10::IValue>{c10::IValue(std::forward<Args>(args))...}, {});
  }
  /// `call(args, kwargs)`: what InputObserver<PackageSet>::call invokes.
  c10::IValue operator()(std::vector<c10::IValue> args, const Kwargs& kwargs) { return call(std::move(args), kwargs); }

  /// Runs the call on the first package (most observed calls first) whose guard takes it;
  /// without one, on the fallback; without a fallback, throws the closest package's guard error
  /// (ArgumentError or ShapeError). Every refusal is counted in `stats()`.
  c10::IValue call(std::vector<c10::IValue> args, const Kwargs& kwargs = {}) {
    const std::shared_ptr<const State> state = std::atomic_load(&shared_->state);
    std::vector<detail::aoti::FlatInput> flat;
    if (const Entry* e = route(*state, args, kwargs, flat)) {
      e->calls->fetch_add(1, std::memory_order_relaxed);
      return e->package.run_accepted(flat);
    }
    const Closest closest = refusal_of_closest(*state, args, kwargs);
    const std::shared_ptr<const Fallback> fallback = std::atomic_load(&shared_->fallback);
    count_refusal(state->plan.id(), closest, fallback != nullptr);
    if (!fallback) closest.refusal.raise();
    return (*fallback)(std::move(args), kwargs);
  }

  /// The package of the set now that would take this call (its index in plan order), or none:
  /// the routing `call` does, without running anything.
  std::optional<size_t> route(const std::vector<c10::IValue>& args, const Kwargs& kwargs = {}) const {
    const std::shared_ptr<const State> state = std::atomic_load(&shared_->state);
    std::vector<detail::aoti::FlatInput> flat;
    const Entry* e = route(*state, args, kwargs, flat);
    return e ? std::optional<size_t>(static_cast<size_t>(e - state->entries.data())) : std::nullopt;
  }

  /// Swaps in `other`'s packages. Calls in flight finish on the packages they started on; calls
  /// after it go to the new ones. The fallback and the stats stay this set's.
  ///
  /// The new packages must take the arguments these take (the rule `load` holds a plan's packages
  /// to): the fallback, and every caller, bind these names and this order, so a set of other
  /// arguments is refused (ArgumentError naming both signatures) rather than swapped in under
  /// them; serve it as a set of its own.
  ///
  /// The replaced packages are destroyed on the thread that calls `replace`, never on a request
  /// thread (a runner's destructor unloads its library and a package's removes its folder: a
  /// pause no call should pay): `replace` waits for the calls still on them (up to kRetireWait,
  /// 2 s) and destroys them before it returns; calls slower than that leave them to the next
  /// `replace`, or to the set's end.
  void replace(const PackageSet& other) {
    const std::shared_ptr<const State> next = std::atomic_load(&other.shared_->state);
    OPTRACE_CHECK(next != nullptr, ArgumentError, "PackageSet::replace: the other set holds no packages");
    std::lock_guard<std::mutex> replacing(shared_->replace_mutex);
    {
      const std::shared_ptr<const State> now = std::atomic_load(&shared_->state);
      const Package& before = now->entries.front().package;
      const Package& after = next->entries.front().package;
      OPTRACE_CHECK(same_arguments(after, before), ArgumentError, "PackageSet::replace: the new set (", next->plan.path(),
                    ") takes ", after.signature(), "; this set (", now->plan.path(), ") takes ", before.signature(),
                    ": its fallback and its callers bind these; serve the other as a set of its own");
    }
    register_counters(*next);
    swap_in(next);
  }

  /// Serves the weights in `path` (torch.save of a dict of tensors by name, as compile_plan and
  /// compile_package.save_weights write; read as given) from now on: a checkpoint of the same
  /// architecture, without recompiling. Every package compiled without its weights gets a new
  /// runner on the same compiled code with these tensors, each checked first (a missing tensor,
  /// or one of another dtype, shape or layout: ArgumentError naming it, and nothing changes);
  /// then all are swapped in at once, as `replace` swaps: a call runs on the old weights or the
  /// new, never a mix. The old runners and weights are freed as `replace` frees a set, so that
  /// two copies of the weights are resident only while calls run on the old ones. Throws
  /// ArgumentError when no package of the set was compiled without its weights.
  void replace_weights(const std::string& path) {
    std::lock_guard<std::mutex> replacing(shared_->replace_mutex);  // the set cannot change from here on
    std::shared_ptr<State> next;
    {
      const std::shared_ptr<const State> now = std::atomic_load(&shared_->state);  // not held past here: swap_in waits for it
      // Before the file is read (it can be gigabytes): a set with no package to give it to.
      OPTRACE_CHECK(shares_weights(*now), ArgumentError, "PackageSet::replace_weights: the packages of ", now->plan.path(),
                    " have their weights inside them (not compiled by compile_plan): recompile them, or replace the set");
      next = std::make_shared<State>(*now);
    }
    auto weights = Package::weights_for(LoadOptions().weights(path));
    for (Entry& e : next->entries)
      if (e.package.shared_weights()) e.package = e.package.with_weights(weights);
    next->weights = std::move(weights);
    swap_in(std::move(next));
  }

  /// The weights file the set's packages run with now ("" when their weights are inside them).
  std::string weights_path() const {
    auto state = std::atomic_load(&shared_->state);
    return state->weights ? state->weights->path : std::string();
  }
  /// The packages in the set now.
  size_t size() const { return std::atomic_load(&shared_->state)->entries.size(); }
  /// The plan the set was loaded from (the one in use now).
  Plan plan() const { return std::atomic_load(&shared_->state)->plan; }
  /// Package `i` of the set now (plan order).
  Package package(size_t i) const {
    auto state = std::atomic_load(&shared_->state);
    OPTRACE_CHECK(i < state->entries.size(), ArgumentError, "no package ", i, " (the set has ", state->entries.size(), ")");
    return state->entries[i].package;
  }
  /// The arguments in forward's order (InputObserver<PackageSet> records by them).
  std::vector<std::string> argument_names() const {
    auto state = std::atomic_load(&shared_->state);
    return state ? state->entries.front().package.argument_names() : std::vector<std::string>{};
  }

  /// A snapshot of what the set served (consistent per counter; calls racing with it may or may
  /// not be in it).
  ServeStats stats() const {
    ServeStats s;
    auto state = std::atomic_load(&shared_->state);
    s.plan = state->plan.id();
    s.retired = shared_->retired_count.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(shared_->mutex);
    for (const Counters& c : shared_->counters) {
      ServeStats::PackageCalls p;
      p.name = c.name;
      p.file = c.file;
      p.plan = c.plan;
      for (const auto& count : c.counts) {
        p.calls += count->load(std::memory_order_relaxed);
        for (const Entry& e : state->entries) p.current |= e.calls == count;
      }
      s.calls += p.calls;
      s.packages.push_back(std::move(p));
    }
    std::stable_sort(s.packages.begin(), s.packages.end(),
                     [](const auto& a, const auto& b) { return a.current != b.current ? a.current : a.calls > b.calls; });
    s.fallbacks = shared_->fallbacks;
    s.refused = shared_->refused;
    s.calls += s.fallbacks + s.refused;
    s.replacements = shared_->replacements.load(std::memory_order_relaxed);
    s.refusals = shared_->refusals;
    std::stable_sort(s.refusals.begin(), s.refusals.end(), [](const auto& a, const auto& b) { return a.calls > b.calls; });
    return s;
  }

 private:
  struct Entry {
    std::string name, file;
    mutable Package package;  // run() is not const; copies share the loaded model
    std::shared_ptr<std::atomic<int64_t>> calls;
  };
  struct State {
    Plan plan;
    std::vector<Entry> entries;
    std::shared_ptr<const detail::aoti::Weights> weights;  // the plan's, read once (null: none)
  };
  // The call counters of every package of that plan, name and file the set has served with (a
  // package loaded again by a replace counts on in the same row; plan A's p0 and plan B's p0 do not).
  struct Counters {
    std::string plan, name, file;
    std::vector<std::shared_ptr<std::atomic<int64_t>>> counts;
  };
  struct Shared {
    std::shared_ptr<const State> state;       // std::atomic_load / atomic_exchange only
    std::shared_ptr<const Fallback> fallback;  // likewise
    std::atomic<int64_t> replacements{0};
    std::atomic<int64_t> retired_count{0};  // retired.size(), for stats() without replace_mutex
    std::mutex replace_mutex;  // one replace at a time; guards `retired`
    std::vector<std::shared_ptr<const State>> retired;  // replaced states some call may still be on
    std::mutex mutex;  // guards what follows
    std::vector<Counters> counters;
    int64_t fallbacks = 0, refused = 0;
    std::vector<ServeStats::Refusals> refusals;
  };
  struct Closest {
    const Entry* entry = nullptr;
    Refusal refusal;
  };

  PackageSet() : shared_(std::make_shared<Shared>()) {}

  /// The file compile_plan writes the plan's weights to, beside plan.json.
  static constexpr std::string_view kWeightsFile = kPlanWeightsFile;

  // The plan's weights beside plan.json (opened as every file a plan names is), or none.
  static std::shared_ptr<const detail::aoti::Weights> plan_weights(const std::string& dir) {
    const std::string shown = detail::beneath_shown(dir, kWeightsFile);
    struct stat st {};
    if (::lstat(shown.c_str(), &st) != 0 && errno == ENOENT) return nullptr;
    const detail::Fd fd = detail::open_file_beneath(dir, kWeightsFile, "the plan's weights");
    return detail::aoti::read_weights(fd.get(), shown);
  }

  /// How long `replace` and `replace_weights` wait for the calls in flight on the old packages
  /// before they return; past it, the old packages are freed by the next replace or with the set.
  static constexpr std::chrono::milliseconds kRetireWait{2000};

  // Makes `next` the set's state: calls after it run on it, calls in flight finish on the old one,
  // which is destroyed here once no call holds it (waiting up to kRetireWait), else kept until a
  // later replace finds it free, so that the last reference is never a request thread's (a state
  // swapped back in is live again: not retired twice). Under replace_mutex.
  void swap_in(std::shared_ptr<const State> next) {
    std::shared_ptr<const State> old = std::atomic_exchange(&shared_->state, next);
    shared_->replacements.fetch_add(1, std::memory_order_relaxed);
    shared_->retired.erase(std::remove(shared_->retired.begin(), shared_->retired.end(), next), shared_->retired.end());
    // Two copies of the weights stay resident while the old state lives: wait for its calls.
    for (const auto until = std::chrono::steady_clock::now() + kRetireWait;
         old.use_count() > 1 && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    shared_->retired.push_back(std::move(old));
    auto done = [](const std::shared_ptr<const State>& s) { return s.use_count() == 1; };
    const size_t before = shared_->retired.size();
    shared_->retired.erase(std::remove_if(shared_->retired.begin(), shared_->retired.end(), done), shared_->retired.end());
#ifdef __GLIBC__
    // Freed weights go back to the system now: glibc raises its mmap threshold to the largest
    // block freed (up to 32 MiB), so the next weights come from the heap, which keeps what they
    // free (benchmarks/serve_weights.sh: 407 MB resident grew to 839 MB over 9 swaps without this).
    if (shared_->retired.size() < before) ::malloc_trim(0);
#endif
    shared_->retired_count.store(static_cast<int64_t>(shared_->retired.size()), std::memory_order_relaxed);
  }

  // Whether some package of the set was compiled without its weights (takes the plan's).
  static bool shares_weights(const State& state) {
    return std::any_of(state.entries.begin(), state.entries.end(), [](const Entry& e) { return e.package.shared_weights(); });
  }

  /// The metadata key compile_plan stores the plan's id under (compile_package.PLAN_KEY).
  static constexpr const char* kPlanKey = "optrace.plan";

  // A package compiled for another plan than the one that names it (a file copied from another
  // plan's folder, a plan made again and not recompiled) would serve calls by ranges it was not
  // compiled for: refused. A package without the key (compiled alone, or for a plan without an id)
  // is taken: nothing says it is another plan's.
  static void check_plan_of(const Plan& plan, const Entry& e) {
    const auto& metadata = e.package.metadata();
    const auto found = metadata.find(kPlanKey);
    if (found == metadata.end() || plan.id().empty() || found->second == plan.id()) return;
    detail::raise_about_file<ArgumentError>(plan.path(), e.name, " (", e.file, ") was compiled for another plan than this one (",
                                            plan.id(), "): compile this plan's packages (compile_plan)");
  }

  // A package whose guard or in_spec is not the one compile_plan recorded in plan.json (compiled
  // again apart, with other ranges or arguments) is refused: drift and `optrace verify PLAN` judge
  // calls by plan.json's record, and would disagree with the set. A plan without the record (not
  // compiled by compile_plan, or before issue 57) is not checked; the in_spec is compared as a
  // tree (its text is torch's to format).
  static void check_recorded_guard(const Plan& plan, const PlannedPackage& planned, const Entry& e) {
    if (planned.compiled_guard.empty()) return;
    const auto& metadata = e.package.metadata();
    const auto guard = metadata.find(std::string(detail::aoti::kGuardKey));
    bool same = guard != metadata.end() && guard->second == planned.compiled_guard;
    if (same && !planned.compiled_in_spec.empty()) {
      try {
        same = detail::aoti::parse_tree_spec(planned.compiled_in_spec) == detail::aoti::parse_tree_spec(e.package.in_spec());
      } catch (const JsonError&) {
        same = false;
      }
    }
    if (!same)
      detail::raise_about_file<ArgumentError>(plan.path(), e.name, " (", e.file, ") takes other inputs than plan.json records of it "
                                              "(its 'guard' and 'in_spec'): it was compiled again apart; compile this plan's packages (compile_plan)");
  }

  // Whether two packages take the same arguments, by name and order: what the packages of a set
  // must share, at load and at replace.
  static bool same_arguments(const Package& a, const Package& b) { return a.argument_names() == b.argument_names(); }

  void register_counters(const State& state) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    const std::string& plan = state.plan.id();
    for (const Entry& e : state.entries) {
      auto row = std::find_if(shared_->counters.begin(), shared_->counters.end(),
                              [&](const Counters& c) { return c.plan == plan && c.name == e.name && c.file == e.file; });
      if (row == shared_->counters.end()) row = shared_->counters.insert(shared_->counters.end(), Counters{plan, e.name, e.file, {}});
      if (std::find(row->counts.begin(), row->counts.end(), e.calls) == row->counts.end()) row->counts.push_back(e.calls);
    }
  }

  // The first package whose checks take the call, with its flat inputs in `flat`; null when none.
  static const Entry* route(const State& state, const std::vector<c10::IValue>& args, const Kwargs& kwargs,
                            std::vector<detail::aoti::FlatInput>& flat) {
    for (const Entry& e : state.entries)
      if (e.package.accepts(args, kwargs, flat)) return &e;
    return nullptr;
  }

  // The refusal of the package that came closest, by the one ranking (aoti::closer: a size
  // outside a range, before another input, before the call's arity or structure; among sizes,
  // the fewest dims outside; the first such package on a tie), which Plan::drift ranks by too.
  // Every package is ranked without building its message (Refusal::want_message); the closest
  // one's is built once.
  static Closest refusal_of_closest(const State& state, const std::vector<c10::IValue>& args, const Kwargs& kwargs) {
    Closest best;
    Refusal best_why;
    std::vector<detail::aoti::FlatInput> flat;
    for (const Entry& e : state.entries) {
      Refusal r;
      r.want_message = false;
      if (e.package.accepts(args, kwargs, flat, &r)) continue;  // cannot happen: every package refused it
      if (!best.entry || detail::aoti::closer(r, best_why)) best_why = std::move(r), best.entry = &e;
    }
    if (best.entry) best.entry->package.accepts(args, kwargs, flat, &best.refusal);
    return best;
  }

  /// Refusal rows kept by `stats()`: past this many, refusals count in one last row (argument
  /// "(other)"), so that traffic cannot grow the stats, whatever it sends.
  static constexpr size_t kMaxRefusalRows = 64;

  // A refusal counted in its row: rows are keyed by the closest package, the argument at fault
  // (none for the call's structure), the dim and the kind (size, other input, structure), never
  // by the caller's data (a scalar's value, a keyword's name are in the message only, which the
  // row keeps from its first call).
  void count_refusal(const std::string& plan, const Closest& c, bool to_fallback) {
    const Refusal& r = c.refusal;
    const std::string package = c.entry ? c.entry->name : "";
    std::lock_guard<std::mutex> lock(shared_->mutex);
    (to_fallback ? shared_->fallbacks : shared_->refused) += 1;
    std::vector<ServeStats::Refusals>& rows = shared_->refusals;
    auto same = [&](const ServeStats::Refusals& row) {
      return row.plan == plan && row.package == package && row.argument == r.argument && row.dim == r.dim && row.shape == r.shape;
    };
    auto row = std::find_if(rows.begin(), rows.end(), same);
    if (row == rows.end() && rows.size() >= kMaxRefusalRows)
      row = std::find_if(rows.begin(), rows.end(), [](const ServeStats::Refusals& x) { return x.argument == "(other)"; });
    if (row != rows.end()) {
      row->calls += 1;
      row->seen_min = std::min(row->seen_min, r.value);
      row->seen_max = std::max(row->seen_max, r.value);
      return;
    }
    ServeStats::Refusals fresh;
    const bool other = rows.size() + 1 >= kMaxRefusalRows;
    fresh.argument = other ? "(other)" : r.argument;
    fresh.dim = other ? -1 : r.dim;
    fresh.shape = !other && r.shape;
    fresh.calls = 1;
    fresh.seen_min = fresh.seen_max = r.value;
    if (!other) {
      fresh.planned_min = r.min;
      fresh.planned_max = r.max;
      fresh.package = package;
      fresh.plan = plan;
    }
    fresh.message = other ? "refusals past the first " + std::to_string(kMaxRefusalRows - 1) + " kinds, counted together (the first: " + r.message + ")"
                          : r.message;
    rows.push_back(std::move(fresh));
  }

  std::shared_ptr<Shared> shared_;
};

}  // namespace optrace::aoti
