// optrace/detail/on_demand/request.hpp: Kineto's on-demand config text, read into an OnDemandRequest
#pragma once
// The keys are libkineto's (libkineto/src/Config.cpp), as `dyno gputrace` sends them; the rules
// that decide a window (which step it starts at, the defaults) are Kineto's too, so that a job
// profiled by optrace answers the same request as one profiled by Kineto:
// - an iteration window when PROFILE_START_ITERATION or PROFILE_START_ITERATION_ROUNDUP is given
//   (Kineto: a roundup alone means start iteration 0) and ACTIVITIES_ITERATIONS > 0; it takes
//   precedence over the time keys. optrace also reads ACTIVITIES_ITERATIONS alone as an
//   iteration window from the next step (Kineto would make it a 500 ms window).
// - otherwise a duration window: from PROFILE_START_TIME (ms since the epoch; 0 or absent: now,
//   as optrace needs no warm-up) for ACTIVITIES_DURATION_MSECS (or _SECS; default 500 ms).

#include <optrace/error.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace {

/// One on-demand profiling request: what Kineto's on-demand config keys ask for (the trigger file
/// of `OnDemandOptions::config_file`, or `OnDemandProfiler::request` from a program's own control
/// channel). Unset fields take the `OnDemandOptions::profiler` defaults.
struct OnDemandRequest {
  /// PROFILE_START_ITERATION: the step to start at (a step already passed: the next one).
  std::optional<int64_t> start_iteration;
  /// PROFILE_START_ITERATION_ROUNDUP: start at the next multiple of this, so that every rank of a
  /// job that reads the same request records the same steps.
  int64_t start_iteration_roundup = 0;
  /// ACTIVITIES_ITERATIONS: steps to record; > 0 makes an iteration window.
  int64_t iterations = 0;
  /// PROFILE_START_TIME: when a duration window starts, ms since the epoch (0: now).
  int64_t start_time_ms = 0;
  /// ACTIVITIES_DURATION_MSECS (or ACTIVITIES_DURATION_SECS × 1000): a duration window's length.
  int64_t duration_ms = 500;
  /// ACTIVITIES_LOG_FILE: the trace's file, inside the output folder (default: a
  /// tensorboard_trace_handler name there).
  std::string log_file;
  /// PROFILE_REPORT_INPUT_SHAPES, PROFILE_PROFILE_MEMORY, PROFILE_WITH_STACK.
  std::optional<bool> record_shapes, profile_memory, with_stack;
  /// ACTIVITY_TYPES: whether device activity (kernels, memcpy, runtime) is asked for; unset:
  /// the defaults' activities.
  std::optional<bool> device_activity;
  /// OPTRACE_CANCEL=1 (optrace's key; Kineto has none): drop the request waiting, or close the
  /// open window with what it recorded. The other keys are then not used.
  bool cancel = false;
  /// Why the window is taken, written in its trace as the top-level "optraceCapture" (a JSON
  /// object; the slow-step capture sets it, `optrace summary --by rank` prints it). Not a config
  /// key. Empty: not written.
  std::string reason_json;

  /// Whether this is an iteration window (else a duration window).
  bool by_iteration() const { return iterations > 0; }

  /// Reads a config text: `KEY=VALUE` lines, `#` comments, blank lines. Keys that do not apply to
  /// optrace are listed in `ignored` (the caller names them in one line; a key that is not an
  /// upper-case name is listed as its line, "line 3"). Throws ArgumentError, one line naming the
  /// key (or the line number) but never the value: the file may hold what should not reach a log.
  static OnDemandRequest parse(std::string_view text, std::vector<std::string>* ignored = nullptr);
};

namespace detail::on_demand {

inline std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// Steps and step counts up to 10^12, so that a window's last step cannot overflow; durations up to a
// week (a window holds its events in memory).
inline constexpr int64_t kMaxSteps = 1000000000000;
inline constexpr int64_t kMaxDurationMs = int64_t{7} * 24 * 3600 * 1000;

// Whether `key` is a config key's name (upper-case letters, digits, '_'): only such a name is
// ever repeated in a message. Values never are.
inline bool is_key_name(std::string_view key) {
  if (key.empty() || key.size() > 64 || !(key[0] >= 'A' && key[0] <= 'Z')) return false;
  for (char c : key)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

inline int64_t to_int(std::string_view key, std::string_view value, int64_t low, int64_t high) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < low || v > high)
    raise<ArgumentError>("on-demand config: ", key, ": expected an integer from ", low, " to ", high);
  return v;
}

inline bool to_bool(std::string_view key, std::string_view value) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  raise<ArgumentError>("on-demand config: ", key, ": expected true or false (or 1/0, yes/no)");
}

// ACTIVITY_TYPES: Kineto's names (libkineto/src/ActivityType.cpp). Whether any device activity
// is among them; an unknown name is an error, as a misspelt one would silently record less.
inline bool device_activity(std::string_view value) {
  static constexpr std::string_view host[] = {"cpu_op", "user_annotation", "python_function", "cpu_instant_event",
                                              "overhead"};
  static constexpr std::string_view device[] = {"gpu_memcpy", "gpu_memset", "concurrent_kernel", "kernel",
                                                "cuda_runtime", "cuda_driver", "gpu_user_annotation",
                                                "cuda_sync", "cuda_profiler_range", "external_correlation"};
  bool any_device = false;
  size_t from = 0;
  while (from <= value.size()) {
    const size_t comma = value.find(',', from);
    std::string name(trim(value.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from)));
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    bool known = name.empty();
    for (std::string_view h : host) known = known || name == h;
    for (std::string_view d : device) {
      if (name == d) known = any_device = true;
    }
    if (!known)
      raise<ArgumentError>("on-demand config: ACTIVITY_TYPES: an activity Kineto does not name (its names: cpu_op, "
                           "user_annotation, kernel, gpu_memcpy, gpu_memset, cuda_runtime, ...)");
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return any_device;
}

// One KEY=VALUE into `r`; false when the key does not apply to optrace.
inline bool apply_key(OnDemandRequest& r, std::string_view key, std::string_view value, bool& start_given) {
  if (key == "PROFILE_START_ITERATION") {
    r.start_iteration = to_int(key, value, 0, kMaxSteps);
    start_given = true;
  } else if (key == "PROFILE_START_ITERATION_ROUNDUP") {
    r.start_iteration_roundup = to_int(key, value, 1, kMaxSteps);
    start_given = true;
  } else if (key == "ACTIVITIES_ITERATIONS") {
    r.iterations = to_int(key, value, 0, kMaxSteps);
  } else if (key == "PROFILE_START_TIME") {
    r.start_time_ms = to_int(key, value, 0, std::numeric_limits<int64_t>::max());
  } else if (key == "ACTIVITIES_DURATION_MSECS") {
    r.duration_ms = to_int(key, value, 1, kMaxDurationMs);
  } else if (key == "ACTIVITIES_DURATION_SECS") {
    r.duration_ms = to_int(key, value, 1, kMaxDurationMs / 1000) * 1000;
  } else if (key == "ACTIVITIES_LOG_FILE") {
    OPTRACE_CHECK(!value.empty(), ArgumentError, "on-demand config: ACTIVITIES_LOG_FILE is empty");
    r.log_file = std::string(value);
  } else if (key == "PROFILE_REPORT_INPUT_SHAPES") {
    r.record_shapes = to_bool(key, value);
  } else if (key == "PROFILE_PROFILE_MEMORY") {
    r.profile_memory = to_bool(key, value);
  } else if (key == "PROFILE_WITH_STACK") {
    r.with_stack = to_bool(key, value);
  } else if (key == "ACTIVITY_TYPES") {
    r.device_activity = device_activity(value);
  } else if (key == "OPTRACE_CANCEL") {
    r.cancel = to_bool(key, value);
  } else {
    return false;
  }
  return true;
}

}  // namespace detail::on_demand

inline OnDemandRequest OnDemandRequest::parse(std::string_view text, std::vector<std::string>* ignored) {
  OnDemandRequest r;
  bool start_given = false;
  int line_number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = detail::on_demand::trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      detail::raise<ArgumentError>("on-demand config: line ", line_number, " is not KEY=VALUE");
    const std::string_view key = detail::on_demand::trim(line.substr(0, eq));
    const std::string_view value = detail::on_demand::trim(line.substr(eq + 1));
    if (!detail::on_demand::apply_key(r, key, value, start_given) && ignored != nullptr)
      ignored->push_back(detail::on_demand::is_key_name(key) ? std::string(key) : "line " + std::to_string(line_number));
  }
  // Kineto: a roundup without a start iteration starts at iteration 0 (the next multiple).
  if (start_given && !r.start_iteration) r.start_iteration = 0;
  if (r.iterations > 0 && !r.start_iteration) r.start_iteration = 0;
  return r;
}

namespace detail::on_demand {

// The step an iteration window starts at, as Kineto decides it
// (ActivityProfilerController / GenericActivityProfiler::isStartIterationReached): the requested
// start iteration when it is ahead; else this step, moved up to the next multiple of the roundup.
inline int64_t window_start(int64_t current_step, int64_t start_iteration, int64_t roundup) {
  if (current_step <= start_iteration) return start_iteration;
  if (roundup <= 0) return current_step;
  const int64_t rem = current_step % roundup;
  return rem == 0 ? current_step : current_step + roundup - rem;
}

}  // namespace detail::on_demand
}  // namespace optrace
