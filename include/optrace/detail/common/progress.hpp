// optrace/detail/common/progress.hpp: a progress bar on stderr, with the rate and the time left
#pragma once
// Drawn only when stderr is a terminal and the work has run a while (300 ms), redrawn at most every
// 100 ms, erased when done. Replay draws it per input, the CLI per file.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace optrace::detail {

class ProgressBar {
 public:
  ProgressBar(bool wanted, int64_t total) : enabled_(wanted && total > 1 && ::isatty(STDERR_FILENO) == 1), total_(total) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { finish(); }

  void update(int64_t done, const std::string& op) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::milliseconds(300) || now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const std::string text = line(done, total_, std::chrono::duration<double>(now - start_).count(), op);
    std::fprintf(stderr, "\r%s", text.c_str());
    std::fflush(stderr);
  }

  /// The bar after `elapsed` seconds: `[#######.......] 30/120 3.0/s 30s left addmm.default`, the
  /// rate and the time left from the inputs done so far ("--" before the first is done).
  static std::string line(int64_t done, int64_t total, double elapsed, const std::string& op) {
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    const std::string name = op.size() > 40 ? op.substr(0, 37) + "..." : op;
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
    const std::string left = rate > 0 ? duration_text(static_cast<double>(total - done) / rate) : "--";
    char buf[256];
    std::snprintf(buf, sizeof buf, "[%s] %lld/%lld %.1f/s %s left %-40s", bar.c_str(), static_cast<long long>(done),
                  static_cast<long long>(total), rate, left.c_str(), name.c_str());
    return buf;
  }

  void finish() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r%*s\r", 30 + 2 + 24 + 24 + 40, "");
    std::fflush(stderr);
    drawn_ = false;
  }

  // "42s", "3m05s", "2h07m".
  static std::string duration_text(double seconds) {
    const long long s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    if (s < 60) std::snprintf(buf, sizeof buf, "%llds", s);
    else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    return buf;
  }

 private:
  bool enabled_;
  int64_t total_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace optrace::detail
