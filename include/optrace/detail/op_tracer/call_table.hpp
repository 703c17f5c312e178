// optrace/detail/op_tracer/call_table.hpp: OpTracer's per-thread table of unique calls
#pragma once
// A recorded call is a flat vector of int64 tokens (recorder.hpp writes them). Each recording
// thread counts equal encodings in its own CallTable. Only that thread changes its table: it
// adds entries behind a SpinLock that only `trace()` contends for, and counts a repeat of an
// op's previous call without the lock (CallCount).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace optrace::detail::op_tracer {

// Hash of an encoding. Two independent multiply lanes: half the dependency chain of a one-lane hash.
inline size_t hash_tokens(const int64_t* v, size_t n) noexcept {
  uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0xC2B2AE3D27D4EB4Full;
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    a = (a ^ static_cast<uint64_t>(v[i])) * 0xff51afd7ed558ccdull;
    b = (b ^ static_cast<uint64_t>(v[i + 1])) * 0xc4ceb9fe1a85ec53ull;
  }
  if (i < n) a = (a ^ static_cast<uint64_t>(v[i])) * 0xff51afd7ed558ccdull;
  uint64_t h = a ^ ((b << 31) | (b >> 33));
  return static_cast<size_t>(h ^ (h >> 29));
}

struct SignatureHash {
  size_t operator()(const std::vector<int64_t>& v) const noexcept { return hash_tokens(v.data(), v.size()); }
};

// Encoded calls: the one being recorded, in a buffer reused from call to call (OpTracer), or
// every recorded event's inputs one after the other (the Profiler's window). A value asks
// for the room it needs once (`extend`) and stores its tokens without a capacity check each:
// vector::push_back's check and out-of-line growth cost as much as the rest of the encoding of
// a small tensor.
class KeyWriter {
 public:
  void clear() { size_ = 0; }
  const int64_t* data() const { return tokens_.get(); }
  size_t size() const { return size_; }
  // Room for `n` more tokens, counted as written; valid until the next call.
  int64_t* extend(size_t n) {
    if (size_ + n > capacity_) grow(size_ + n);
    int64_t* p = tokens_.get() + size_;
    size_ += n;
    return p;
  }
  void put(int64_t token) { *extend(1) = token; }
  // Keeps the first `n` tokens (n <= size()): drops what a failed encoding wrote.
  void truncate(size_t n) { size_ = n; }

 private:
  // realloc, not new and a copy: a Profiler window's tokens grow to megabytes, and glibc moves a
  // block it has mapped on its own (a large one) by remapping its pages rather than copying them.
  // The new room is left unfilled.
  void grow(size_t needed) {
    const size_t capacity = std::max<size_t>({needed, 2 * capacity_, 256});
    void* bigger = std::realloc(tokens_.get(), capacity * sizeof(int64_t));
    if (bigger == nullptr) throw std::bad_alloc();
    tokens_.release();
    tokens_.reset(static_cast<int64_t*>(bigger));
    capacity_ = capacity;
  }
  struct Free {
    void operator()(int64_t* p) const { std::free(p); }
  };
  std::unique_ptr<int64_t, Free> tokens_;
  size_t capacity_ = 0;
  size_t size_ = 0;  // tokens written
};

// A call count that only its recording thread adds to, and without a lock (a repeated call is
// counted on the lock-free paths, recorder.hpp: on_start's and count_repeat), while `trace()` may
// read it under the buffer's lock: relaxed atomic loads and stores, no read-modify-write.
// Copyable, so that an Aggregate copies (the table's entries, the merge of `trace()`).
class CallCount {
 public:
  CallCount(int64_t n = 0) : n_(n) {}  // NOLINT: an int64 in all but the atomic access
  CallCount(const CallCount& other) : n_(other.get()) {}
  CallCount& operator=(const CallCount& other) {
    n_.store(other.get(), std::memory_order_relaxed);
    return *this;
  }
  operator int64_t() const { return get(); }  // NOLINT
  int64_t get() const { return n_.load(std::memory_order_relaxed); }
  // By the recording thread only.
  void add(int64_t n) { n_.store(get() + n, std::memory_order_relaxed); }
  CallCount& operator+=(int64_t n) {
    add(n);
    return *this;
  }

 private:
  std::atomic<int64_t> n_;
};

struct Aggregate {
  CallCount count = 0;
  uint64_t first_seen = 0;
  std::vector<std::optional<std::pair<int64_t, int64_t>>> ranges;  // extended: per positional argument
};

// Calls of one op counted but not kept as unique inputs: over the session's max_unique_inputs, or
// with an argument the encoder cannot read (a nested tensor: its sizes() throws).
struct Dropped {
  int64_t count = 0;
  uint64_t first_seen = 0;
  int64_t over_budget = 0;  // of count
  std::string unreadable;   // the first unreadable call's error, if any
};

// One thread's unique calls. Their encodings lie end to end in blocks that never move, and the
// entries in a deque, so an op's cache slot can point at its last call's entry (recorder.hpp:
// count_repeat) however the table grows. `slots_` is an open-addressing table (power-of-two
// size, linear probing) of positions in `entries_`. A call seen before costs one hash, one probe
// and a memcmp against the scratch encoding: no key copy, no node to chase, no modulo by a prime
// (what std::unordered_map<std::vector<int64_t>> costs).
class CallTable {
 public:
  struct Entry {
    size_t hash;
    const int64_t* tokens;  // the encoding, `length` tokens, in a block of `blocks_`
    size_t length;
    Aggregate agg;
    const int64_t* end() const { return tokens + length; }
  };

  static constexpr size_t kNone = SIZE_MAX;
  // Every block holds this many zero tokens past its last encoding: a reader comparing a
  // tensor's three head tokens at an encoding's end reads them in place of a bounds check, and
  // finds no kTensor there (a zero, or the next encoding's first token, an OpInfo's address).
  static constexpr size_t kPadding = 3;

  // The position (in first-recorded order) of the entry whose encoding is `key[0..n)`, or kNone.
  size_t find(const int64_t* key, size_t n, size_t hash) const {
    if (slots_.empty()) return kNone;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      uint32_t slot = slots_[i];
      if (slot == 0) return kNone;
      const Entry& e = entries_[slot - 1];
      if (e.hash == hash && holds(e, key, n)) return slot - 1;
    }
  }
  // Whether `e`'s encoding is `key[0..n)`.
  static bool holds(const Entry& e, const int64_t* key, size_t n) {
    return e.length == n && std::memcmp(e.tokens, key, n * sizeof(int64_t)) == 0;
  }
  // Adds `key[0..n)`, which `find` did not find; returns its position.
  size_t insert(const int64_t* key, size_t n, size_t hash, Aggregate agg) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(std::max<size_t>(64, 2 * slots_.size()));
    entries_.push_back(Entry{hash, store(key, n), n, std::move(agg)});
    place(hash, static_cast<uint32_t>(entries_.size()));
    return entries_.size() - 1;
  }
  Entry& entry(size_t position) { return entries_[position]; }
  const std::deque<Entry>& entries() const { return entries_; }
  std::vector<int64_t> key(const Entry& e) const { return std::vector<int64_t>(e.tokens, e.end()); }

 private:
  // Copies an encoding into the current block, or a new one (each twice the last, up to 64 Ki
  // tokens, or as long as the encoding), keeping kPadding zeros after it.
  const int64_t* store(const int64_t* key, size_t n) {
    if (block_left_ < n + kPadding) {
      size_t size = std::max(std::min<size_t>(2 * block_size_, 64 * 1024), n + kPadding);
      blocks_.emplace_back(new int64_t[size]());  // zeroed: the padding
      block_next_ = blocks_.back().get();
      block_left_ = block_size_ = size;
    }
    int64_t* at = block_next_;
    std::memcpy(at, key, n * sizeof(int64_t));
    block_next_ += n;
    block_left_ -= n;
    return at;
  }
  void place(size_t hash, uint32_t slot) {
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
  void rehash(size_t size) {
    slots_.assign(size, 0);
    for (size_t k = 0; k < entries_.size(); ++k) place(entries_[k].hash, static_cast<uint32_t>(k + 1));
  }

  std::vector<std::unique_ptr<int64_t[]>> blocks_;
  int64_t* block_next_ = nullptr;
  size_t block_left_ = 0, block_size_ = 256;
  std::deque<Entry> entries_;    // first-recorded order; never moved
  std::vector<uint32_t> slots_;  // 0: empty, else a position in entries_ plus one
};

// A spinlock: taken by one thread on each recorded call and, rarely, by `trace()`; unlocking is
// a plain store, cheaper than std::mutex's on this hot path.
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace optrace::detail::op_tracer
