// optrace/detail/common/block_vector.hpp: an append-only sequence whose elements never move
#pragma once
// A recording appends an element per event for as long as its window lasts, millions of them.
// A std::vector copies every element each time it grows, all at once, inside the op that happens
// to append: 150-175 ms for the millionth event of a Profiler window (bench_op_tracer_overhead
// latency), and it holds the old and the new copy meanwhile. BlockVector keeps its elements in
// blocks of 2^kBlockShift instead: appending never copies what is there, an element's address
// never changes, and memory grows one block at a time. Indexing costs a shift and a mask more.
// Why 4,096 elements a block (as PyTorch's AppendOnlyList weighs its ChunkSize): large enough that
// the block's allocation is one per 4,096 appends (a few instructions each, where a heap
// allocation costs hundreds), small enough that a thread which records a handful of events (one
// of libtorch's pool threads) holds little: a block of the Profiler's MemoryEvents is 192 KiB. Its
// 104-byte Events take blocks of 512 (52 KiB; window.hpp says why).

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace optrace::detail {

template <class T, size_t kBlockShift = 12>
class BlockVector {
  // Blocks are raw memory, elements copied in as they come (no block-wide construction).
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "BlockVector holds plain records");
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "BlockVector's blocks use the default alignment");

 public:
  static constexpr size_t kBlockSize = size_t{1} << kBlockShift;

  BlockVector() = default;
  BlockVector(std::initializer_list<T> items) {
    for (const T& item : items) push_back(item);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return blocks_[i >> kBlockShift].get()[i & (kBlockSize - 1)]; }
  const T& operator[](size_t i) const { return blocks_[i >> kBlockShift].get()[i & (kBlockSize - 1)]; }

  void push_back(const T& item) {
    const size_t k = size_ & (kBlockSize - 1);
    if (k == 0) {
      // Owned before blocks_ grows: a bad_alloc there frees the new block.
      std::unique_ptr<T, Free> block(static_cast<T*>(::operator new(kBlockSize * sizeof(T))));
      blocks_.push_back(std::move(block));
    }
    new (blocks_.back().get() + k) T(item);
    ++size_;
  }

  // Random access (an index into the blocks), so that the standard algorithms that need it
  // (std::upper_bound's binary search) take a BlockVector as they take a vector.
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    const_iterator(const BlockVector* v, size_t i) : v_(v), i_(i) {}
    reference operator*() const { return (*v_)[i_]; }
    pointer operator->() const { return &(*v_)[i_]; }
    reference operator[](difference_type n) const { return (*v_)[i_ + static_cast<size_t>(n)]; }
    const_iterator& operator++() { return *this += 1; }
    const_iterator operator++(int) {
      const_iterator old = *this;
      *this += 1;
      return old;
    }
    const_iterator& operator--() { return *this -= 1; }
    const_iterator operator--(int) {
      const_iterator old = *this;
      *this -= 1;
      return old;
    }
    const_iterator& operator+=(difference_type n) {
      i_ = static_cast<size_t>(static_cast<difference_type>(i_) + n);
      return *this;
    }
    const_iterator& operator-=(difference_type n) { return *this += -n; }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
    friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.i_ == b.i_; }
    friend bool operator!=(const const_iterator& a, const const_iterator& b) { return a.i_ != b.i_; }
    friend bool operator<(const const_iterator& a, const const_iterator& b) { return a.i_ < b.i_; }
    friend bool operator>(const const_iterator& a, const const_iterator& b) { return a.i_ > b.i_; }
    friend bool operator<=(const const_iterator& a, const const_iterator& b) { return a.i_ <= b.i_; }
    friend bool operator>=(const const_iterator& a, const const_iterator& b) { return a.i_ >= b.i_; }

   private:
    const BlockVector* v_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  struct Free {
    void operator()(T* block) const { ::operator delete(block); }
  };
  std::vector<std::unique_ptr<T, Free>> blocks_;
  size_t size_ = 0;
};

}  // namespace optrace::detail
