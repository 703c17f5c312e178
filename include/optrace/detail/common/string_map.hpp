// optrace/detail/common/string_map.hpp: a map from strings to values, looked up by string_view
#pragma once
// The importers look up a key for every event (an op's name, its inputs' text): std::unordered_map
// would need a std::string to look up (a copy each time) and chases a node per probe. This one
// keeps hashes and positions in one open-addressing array (power-of-two size, linear probing) and
// the keys and values in insertion order.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace optrace::detail {

template <class V>
class StringMap {
 public:
  /// The value of `key`, or nullptr.
  V* find(std::string_view key) {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash(key);
    for (size_t i = h & mask(); slots_[i].used; i = (i + 1) & mask())
      if (slots_[i].hash == h && keys_[slots_[i].index] == key) return &values_[slots_[i].index].value;
    return nullptr;
  }

  /// Adds `key` (which must not be in the map) with `value`; returns the stored value.
  V& insert(std::string_view key, V value) {
    if ((keys_.size() + 1) * 4 > slots_.size() * 3) grow();
    const uint64_t h = hash(key);
    place(h, static_cast<uint32_t>(keys_.size()));
    keys_.emplace_back(key);
    values_.push_back(Value{std::move(value)});
    return values_.back().value;
  }

  size_t size() const { return keys_.size(); }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t index = 0;
    bool used = false;
  };

  static uint64_t hash(std::string_view key) { return std::hash<std::string_view>()(key); }
  size_t mask() const { return slots_.size() - 1; }

  void place(uint64_t h, uint32_t index) {
    size_t i = h & mask();
    while (slots_[i].used) i = (i + 1) & mask();
    slots_[i] = Slot{h, index, true};
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& s : old)
      if (s.used) place(s.hash, s.index);
  }

  std::vector<Slot> slots_;
  std::vector<std::string> keys_;
  struct Value {  // not std::vector<bool>'s packed bits
    V value;
  };
  std::vector<Value> values_;
};

}  // namespace optrace::detail
