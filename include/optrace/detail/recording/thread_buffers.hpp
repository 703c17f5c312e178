// optrace/detail/recording/thread_buffers.hpp: each recording thread's buffer of one recording
#pragma once
// A recording (OpTracer's Session, the Profiler's Window) gives each thread that records into it
// a buffer of its own, so that the callbacks' hot path takes no lock but that buffer's
// (uncontended). A thread adds its buffer once, when it first records into the recording,
// under ActiveRecording's view: none is added after the recording was retracted. So readers lock
// while threads may still add (OpTracer::trace() while recording: for_each), and read without
// the lock once the recording was retracted (a closed window's writers: size, [], begin, end).
// Buffers are shared: a trace of several windows (OnDemandProfiler's ring) lists theirs (share).

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace optrace::detail {

template <class Buffer>
class ThreadBuffers {
 public:
  // Adds the calling thread's buffer; it lives as long as the recording.
  Buffer& add(std::unique_ptr<Buffer> buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    list_.push_back(std::move(buffer));
    return *list_.back();
  }

  // Adds a buffer of another recording that no thread writes any more (a closed window's).
  void share(std::shared_ptr<Buffer> buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    list_.push_back(std::move(buffer));
  }

  // Calls `with(buffer)` for each buffer, under the lock that `add` takes.
  template <class With>
  void for_each(With&& with) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : list_) with(*b);
  }

  // Once no thread can add one (the recording was retracted): unlocked reads, in the order the
  // threads added them.
  size_t size() const { return list_.size(); }
  const std::shared_ptr<Buffer>& operator[](size_t i) const { return list_[i]; }
  auto begin() const { return list_.begin(); }
  auto end() const { return list_.end(); }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<Buffer>> list_;
};

}  // namespace optrace::detail
