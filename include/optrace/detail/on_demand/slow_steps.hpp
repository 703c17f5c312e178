// optrace/detail/on_demand/slow_steps.hpp: which steps are slow, and how the ranks of a job agree to record after one
#pragma once
// The slow-step capture of OnDemandProfiler (OnDemandOptions::slow_steps, issue 58):
// - StepTimes judges each step against the median of the steps before it, on the stepping
//   thread, in O(history) and without allocating;
// - a rank that saw a slow step publishes a capture in the job's store, and every rank's polling
//   thread reads it there and records the same steps (publish_capture, read_captures). One
//   capture per slowdown: ranks that wait in a collective for a late one see the same step slow,
//   and the first to claim the capture's number publishes it; a later claim whose slow step falls
//   before the end of the last capture's window is dropped.
// Nothing here has a thread, a clock or libtorch: test_on_demand tests it with a store in memory
// (RankStore is distributed.hpp's).

#include <optrace/detail/on_demand/request.hpp>
#include <optrace/distributed.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace optrace::detail::on_demand {

// The step times of the last `history` steps (a ring), and whether a step is slow against them.
class StepTimes {
 public:
  StepTimes(int64_t history, double factor, int64_t min_ns)
      : ring_(static_cast<size_t>(history)), scratch_(static_cast<size_t>(history)), factor_(factor), min_ns_(min_ns) {}

  // A step of `ns` ended. Whether it is slow: the ring is full, and the step is longer than
  // factor × the median of the ring and at least min_ns (*median_ns then holds that median).
  // Added to the ring either way.
  bool add(int64_t ns, int64_t* median_ns) {
    int64_t m = 0;
    const bool slow = judged(ns, &m) && static_cast<double>(ns) > factor_ * static_cast<double>(m);
    if (slow && median_ns != nullptr) *median_ns = m;
    return slow;
  }

  // A step of `ns` ended. Whether it is judged at all (the ring is full, and the step at least
  // min_ns; *median_ns then holds the median of the ring), for a rule of the job's own
  // (SlowSteps::is_slow). Added to the ring either way.
  bool judged(int64_t ns, int64_t* median_ns) {
    const bool judge = count_ == ring_.size() && ns >= min_ns_;
    if (judge) *median_ns = median();
    ring_[next_] = ns;
    next_ = (next_ + 1) % ring_.size();
    count_ = std::min(count_ + 1, ring_.size());
    return judge;
  }

  // Forgets every step: the next `history` steps are judged by none (after a window, whose own
  // steps the profiling slowed).
  void clear() {
    count_ = 0;
    next_ = 0;
  }

  size_t size() const { return count_; }

  // The median of the ring (the upper one of an even count); the ring is not empty.
  int64_t median() {
    std::copy(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count_), scratch_.begin());
    auto mid = scratch_.begin() + static_cast<std::ptrdiff_t>(count_ / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.begin() + static_cast<std::ptrdiff_t>(count_));
    return *mid;
  }

 private:
  std::vector<int64_t> ring_, scratch_;
  size_t next_ = 0, count_ = 0;
  double factor_;
  int64_t min_ns_;
};

// One capture: the slow step a rank saw, and the window of steps every rank records for it.
struct Capture {
  int64_t step = 0;              // the slow step (0-based: the step() count when it began)
  int64_t step_ns = 0;           // its duration
  int64_t median_ns = 0;         // the median of the steps before it
  int64_t rank = -1;             // the rank that saw it (-1: not known)
  int64_t start = 0;             // the window's first step (after the slow step; the ring's: before it)
  int64_t iterations = 0;        // and its length

  // The store's text: seven integers.
  std::string to_text() const {
    std::string s = "1";  // the format's version
    for (int64_t v : {step, step_ns, median_ns, rank, start, iterations}) s += " " + std::to_string(v);
    return s;
  }

  // Reads to_text's text; nullopt for anything else (another version, another writer).
  static std::optional<Capture> from_text(std::string_view text) {
    int64_t v[7];
    const char* p = text.data();
    const char* end = p + text.size();
    for (int k = 0; k < 7; ++k) {
      if (k > 0) {
        if (p == end || *p != ' ') return std::nullopt;
        ++p;
      }
      const auto r = std::from_chars(p, end, v[k]);
      if (r.ec != std::errc()) return std::nullopt;
      p = r.ptr;
    }
    Capture c{v[1], v[2], v[3], v[4], v[5], v[6]};
    if (p != end || v[0] != 1 || c.step < 0 || c.step > kMaxSteps || c.step_ns < 0 || c.median_ns < 0 || c.rank < -1 ||
        c.start < 0 || c.start > kMaxSteps || c.iterations < 1 || c.iterations > kMaxSteps ||
        c.start + c.iterations <= c.step)  // the steps end after the slow one (they hold it: the ring)
      return std::nullopt;
    return c;
  }

  // What the window's trace says of why it was taken: its "optraceCapture" object, with the
  // factor that judged the step, or none when the job's own rule did (SlowSteps::is_slow).
  std::string to_json(std::optional<double> factor) const {
    auto ms = [](int64_t ns) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
      return std::string(buf);
    };
    char f[48] = "\"judged_by\": \"is_slow\"";
    if (factor) std::snprintf(f, sizeof f, "\"factor\": %g", *factor);
    return "{\"trigger\": \"slow_step\", \"step\": " + std::to_string(step) + ", \"step_ms\": " + ms(step_ns) +
           ", \"median_ms\": " + ms(median_ns) + ", " + f + ", \"rank\": " + std::to_string(rank) +
           ", \"first_step\": " + std::to_string(start) + ", \"iterations\": " + std::to_string(iterations) + "}";
  }
};

// The store's keys, under one prefix: "count" (captures published), "claim/<g>" (the rank that
// adds 1 first publishes capture g), "<g>" (capture g's text).
inline constexpr const char* kStorePrefix = "optrace/slow_steps/";

enum class Published { Yes, Claimed, Covered, Limit };

// Publishes `c` as the next capture, unless another rank claimed its number first (Claimed), the
// last capture of this run of the job (numbered after `first`, the store's count when it started:
// an earlier run's steps count from 0 again) ends its window after c's slow step (Covered: the
// same slowdown, seen by another rank), or the store already counts `last` captures (Limit: first
// plus max_captures). `*g` receives the capture's number (Yes), or the store's count.
inline Published publish_capture(RankStore& store, const Capture& c, int64_t first, int64_t last, int64_t* g) {
  const std::string prefix = kStorePrefix;
  const int64_t count = store.add(prefix + "count", 0);
  *g = count;
  if (count > first) {
    const std::optional<Capture> latest = Capture::from_text(store.get(prefix + std::to_string(count)));
    if (latest && c.step < latest->start + latest->iterations) return Published::Covered;
  }
  if (count >= last) return Published::Limit;
  if (store.add(prefix + "claim/" + std::to_string(count + 1), 1) != 1) return Published::Claimed;
  store.set(prefix + std::to_string(count + 1), c.to_text());
  store.add(prefix + "count", 1);
  *g = count + 1;
  return Published::Yes;
}

// The captures published after the `*seen` first, in order (*seen advanced past them); a text
// that is not a capture is counted as seen and left out.
inline std::vector<Capture> read_captures(RankStore& store, int64_t* seen, int64_t* unreadable) {
  const std::string prefix = kStorePrefix;
  const int64_t count = store.add(prefix + "count", 0);
  std::vector<Capture> out;
  // A count far ahead (another writer's key, a store reused by a long job) is read from its last
  // few: older captures' windows have passed.
  if (count - *seen > 16) *seen = count - 16;
  for (; *seen < count; ++*seen) {
    const std::optional<Capture> c = Capture::from_text(store.get(prefix + std::to_string(*seen + 1)));
    if (c) out.push_back(*c);
    else ++*unreadable;
  }
  return out;
}

}  // namespace optrace::detail::on_demand
