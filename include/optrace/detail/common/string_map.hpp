// optrace/detail/common/string_map.hpp: a map from strings to values, looked up by string_view
#pragma once
// The importers look up a key for every event (an op's name, its inputs' text): std::unordered_map
// would need a std::string to look up (a copy each time) and chases a node per probe. This one
// keeps hashes and positions in one open-addressing array (HashIndex) and the keys and values in
// insertion order. hash_bytes is its hash, and the Kineto importer's for an event's argument
// fields. OpTrace and the op catalogs index op names with it too.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace::detail {

// FNV-1a: a hash that is the same on every platform, build and run, for what is stored or
// reproduced (replay's per-op seeds, a plan's id); slow, so not for tables.
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// A fast 64-bit hash of bytes, for in-memory tables only (nothing stored depends on its values):
// wyhash's scheme, 16 bytes per 64x64->128-bit multiply. std::hash (MurmurHash2, 8 bytes a round)
// took twice as long on the ~100-300-byte argument fields of a Kineto event.
inline uint64_t hash_mix(uint64_t a, uint64_t b) {
#ifdef __SIZEOF_INT128__
  const __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
#else
  const uint64_t r = (a ^ (a >> 29)) * (b | 1);
  return r ^ (r >> 32) ^ b;
#endif
}

// The bytes of `s` mixed into `seed`, one multiply per 16 bytes and one for the rest: the body of
// hash_bytes, and of hashes over several strings (their sizes mixed in: "ab","c" is not "a","bc").
inline uint64_t hash_mix_bytes(std::string_view s, uint64_t seed) {
  constexpr uint64_t k1 = 0xe7037ed1a0b428dbull;
  auto load64 = [](const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  auto load32 = [](const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return static_cast<uint64_t>(v);
  };
  const char* p = s.data();
  const size_t n = s.size();
  uint64_t a = 0, b = 0;
  if (n <= 16) {
    if (n >= 4) {
      const size_t mid = (n >> 3) << 2;
      a = (load32(p) << 32) | load32(p + mid);
      b = (load32(p + n - 4) << 32) | load32(p + n - 4 - mid);
    } else if (n > 0) {
      a = (static_cast<uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
          (static_cast<uint64_t>(static_cast<unsigned char>(p[n >> 1])) << 8) | static_cast<unsigned char>(p[n - 1]);
    }
  } else {
    size_t left = n;
    for (; left > 16; left -= 16, p += 16) seed = hash_mix(load64(p) ^ k1, load64(p + 8) ^ seed);
    a = load64(p + left - 16);
    b = load64(p + left - 8);
  }
  return hash_mix(a ^ k1 ^ n, b ^ seed);
}

inline uint64_t hash_bytes(std::string_view s, uint64_t seed = 0) {
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k2 = 0x8ebc6af09c88c6e3ull;
  return hash_mix(hash_mix_bytes(s, seed ^ k0), k2);
}

// Whether `a` and `b` hold the same bytes: the sizes, then one memcmp (string_view's == goes
// through compare(), an ordering and a call more, on the importers' every key lookup).
inline bool same_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// An open-addressing index (power-of-two size, linear probing, load at most 3/4) from 64-bit
// hashes to positions in the caller's own storage, which says when two keys are the same:
// StringMap's table, and the Kineto importer's over an event's fields (kept as views).
class HashIndex {
 public:
  /// The position stored under hash `h` for which `same(position)` holds; false if none.
  template <class Same>
  bool find(uint64_t h, const Same& same, uint32_t& position) const {
    if (slots_.empty()) return false;
    for (size_t i = h & mask(); slots_[i].used; i = (i + 1) & mask())
      if (slots_[i].hash == h && same(slots_[i].position)) {
        position = slots_[i].position;
        return true;
      }
    return false;
  }

  /// Room for `n` positions without growing.
  void reserve(size_t n) {
    size_t slots = slots_.empty() ? 8 : slots_.size();
    while (n * 4 > slots * 3) slots *= 2;
    if (slots > slots_.size()) grow(slots);
  }

  /// Stores `position` under hash `h` (its key must not be stored yet).
  void insert(uint64_t h, uint32_t position) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow(slots_.empty() ? 8 : slots_.size() * 2);
    place(Slot{h, position, true});
    ++size_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t position = 0;
    bool used = false;
  };

  size_t mask() const { return slots_.size() - 1; }

  void place(const Slot& s) {
    size_t i = s.hash & mask();
    while (slots_[i].used) i = (i + 1) & mask();
    slots_[i] = s;
  }

  void grow(size_t slots) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(slots, Slot{});
    for (const Slot& s : old)
      if (s.used) place(s);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// Key: std::string, or std::string_view where the keys' text outlives the map (the Kineto
// importer's op names, views into the document: no copy).
template <class V, class Key = std::string>
class StringMap {
 public:
  /// The value of `key`, or nullptr.
  V* find(std::string_view key) { return const_cast<V*>(std::as_const(*this).find(key)); }
  const V* find(std::string_view key) const {
    uint32_t k;
    if (!index_.find(hash_bytes(key), [&](uint32_t p) { return same_bytes(entries_[p].key, key); }, k)) return nullptr;
    return &entries_[k].value;
  }

  /// Adds `key` (which must not be in the map) with `value`; returns the stored value (valid
  /// until the next insert).
  V& insert(std::string_view key, V value) {
    index_.insert(hash_bytes(key), static_cast<uint32_t>(entries_.size()));
    entries_.push_back(Entry{Key(key), std::move(value)});
    return entries_.back().value;
  }

  /// The value of `key`, added default-constructed if absent (valid until the next insert).
  V& find_or_insert(std::string_view key) {
    if (V* v = find(key)) return *v;
    return insert(key, V{});
  }

  size_t size() const { return entries_.size(); }

  /// Calls `f(key, value)` for each entry, in the order they were inserted.
  template <class F>
  void for_each(F f) const {
    for (const Entry& e : entries_) f(std::string_view(e.key), e.value);
  }

  /// Room for `n` keys without growing.
  void reserve(size_t n) {
    index_.reserve(n);
    entries_.reserve(n);
  }

 private:
  struct Entry {  // one vector for keys and values: one growth, not two
    Key key;
    V value;
  };
  HashIndex index_;
  std::vector<Entry> entries_;
};

}  // namespace optrace::detail
