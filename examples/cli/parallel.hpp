// examples/cli/parallel.hpp: many files, all cores, results in the order given. A window of at
// most `jobs` files is being read at any time, so memory stays bounded by what `jobs` files take,
// whatever their number.
#pragma once

#include <optrace/detail/common/progress.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace cli {

// Files read at once: `jobs`, or one per core (at least 1).
inline size_t jobs_for(int64_t jobs, size_t files) {
  size_t n = jobs > 0 ? static_cast<size_t>(jobs) : std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min(n, files));
}

// Calls `work(i)` for every index of `paths`, up to `jobs` at once on threads, and
// `use(i, result)` on this thread in the order of `paths`. An exception from `work` reaches the caller at its turn
// (the files before it are used first); files read ahead are waited for, not used.
template <class Work, class Use>
void in_order(const std::vector<std::string>& paths, int64_t jobs, Work work, Use use) {
  using Result = decltype(work(size_t{0}));
  const size_t window = jobs_for(jobs, paths.size());
  optrace::detail::ProgressBar progress(paths.size() > 1, static_cast<int64_t>(paths.size()));
  std::deque<std::future<Result>> pending;
  size_t next = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    while (next < paths.size() && pending.size() < window)
      pending.push_back(std::async(std::launch::async, [&work, k = next++] { return work(k); }));
    progress.update(static_cast<int64_t>(i), paths[i]);
    Result result = pending.front().get();
    pending.pop_front();
    use(i, std::move(result));
  }
}

}  // namespace cli
