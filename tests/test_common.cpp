// Tests for the foundation: optrace/error.hpp and optrace/detail/common/ (no libtorch header needed).
#include <optrace/detail/common/block_vector.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "optrace_catch.hpp"

TEST_CASE("errors: message format and nesting", "[common]") {
  CHECK_THROWS_WITH(optrace::detail::raise<optrace::ArgumentError>("argument 'x': rank ", 2),
                    "optrace: ArgumentError: argument 'x': rank 2");
  CHECK_THROWS_AS(optrace::detail::raise<optrace::ShapeError>("bad"), optrace::Error);
  CHECK_THROWS_WITH(throw optrace::JsonError("/a/0", "expected an integer, got string \"abc\""),
                    "optrace: JsonError at /a/0: expected an integer, got string \"abc\"");
  try {
    try {
      throw std::out_of_range("inner");
    } catch (...) {
      optrace::detail::raise<optrace::IoError>("outer");
    }
  } catch (const optrace::IoError& e) {
    CHECK(std::string(e.what()) == "optrace: IoError: outer");
    CHECK_THROWS_AS(std::rethrow_if_nested(e), std::out_of_range);
  }
}

TEST_CASE("errors: every form of raise throws the family's error, the cause kept", "[common]") {
  CHECK_THROWS_WITH(optrace::detail::raise_json("/a/0", "expected an integer, got ", 7),
                    "optrace: JsonError at /a/0: expected an integer, got 7");
  CHECK_THROWS_WITH(optrace::detail::throw_error<optrace::TextError>("log.txt", 3, 5, "expected ')'"),
                    "optrace: TextError at log.txt:3:5: expected ')'");
  try {
    try {
      throw optrace::JsonError("/x", "inner");
    } catch (const optrace::JsonError& e) {
      optrace::detail::throw_error<optrace::JsonError>(e.under("/traceEvents/3"));
    }
  } catch (const optrace::JsonError& e) {
    CHECK(e.path() == "/traceEvents/3/x");
    CHECK_THROWS_AS(std::rethrow_if_nested(e), optrace::JsonError);
  }
}

TEST_CASE("errors: the bare message and a JSON path re-rooted without parsing text", "[common]") {
  optrace::ArgumentError a("scalar changed between calls: 0.5 and 0.25");
  CHECK(a.message() == "scalar changed between calls: 0.5 and 0.25");
  CHECK(std::string(a.what_without_prefix()) == "ArgumentError: scalar changed between calls: 0.5 and 0.25");
  optrace::Error plain("plain");
  CHECK(std::string(plain.what()) == "optrace: Error: plain");
  // A message that itself holds the text "optrace: JsonError at /x: " is kept whole.
  optrace::JsonError inner("/Input Dims/0", "optrace: JsonError at /x: expected a list");
  optrace::JsonError outer = inner.under("/traceEvents/12/args");
  CHECK(outer.path() == "/traceEvents/12/args/Input Dims/0");
  CHECK(outer.message() == "optrace: JsonError at /x: expected a list");
  CHECK(std::string(outer.what()) == "optrace: JsonError at /traceEvents/12/args/Input Dims/0: optrace: JsonError at /x: expected a list");
  CHECK(optrace::JsonError("", "malformed").under("/a").path() == "/a");
  CHECK(std::string(optrace::JsonError("", "malformed").what()) == "optrace: JsonError at /: malformed");
}
TEST_CASE("StringMap: looked up by string_view, grows, keeps what it holds", "[common]") {
  optrace::detail::StringMap<uint32_t> map;
  CHECK(map.find("a") == nullptr);
  for (uint32_t k = 0; k < 1000; ++k) map.insert("key " + std::to_string(k), k);
  CHECK(map.size() == 1000);
  for (uint32_t k = 0; k < 1000; ++k) {
    const uint32_t* v = map.find("key " + std::to_string(k));
    REQUIRE(v != nullptr);
    CHECK(*v == k);
  }
  CHECK(map.find("key 1000") == nullptr);
  CHECK(map.find("") == nullptr);
  map.insert("", 7);  // the empty key is a key
  CHECK(*map.find("") == 7);
  CHECK(map.find_or_insert("") == 7);  // found, not added
  map.find_or_insert("new") += 5;       // added as 0
  CHECK(*map.find("new") == 5);
  CHECK(map.size() == 1002);
  optrace::detail::StringMap<bool> flags;  // not std::vector<bool>'s proxies
  flags.insert("yes", true);
  *flags.find("yes") = false;
  CHECK(*flags.find("yes") == false);
  // Keys as views (their text outlives the map), room reserved first, then past the room.
  std::vector<std::string> texts;
  for (int k = 0; k < 100; ++k) texts.push_back("op" + std::to_string(k));
  optrace::detail::StringMap<int, std::string_view> views;
  views.reserve(10);
  for (int k = 0; k < 100; ++k) views.insert(texts[static_cast<size_t>(k)], k);
  for (int k = 0; k < 100; ++k) CHECK(*views.find("op" + std::to_string(k)) == k);
  CHECK(views.find("op100") == nullptr);
  CHECK(views.size() == 100);
}

TEST_CASE("BlockVector: elements kept in order, at addresses that never change", "[common]") {
  struct Record {
    int64_t a = -1;
    int32_t b = -1;
  };
  optrace::detail::BlockVector<Record, 4> v;  // blocks of 16
  CHECK(v.empty());
  std::vector<const Record*> addresses;
  for (int64_t k = 0; k < 1000; ++k) {
    v.push_back(Record{k, static_cast<int32_t>(3 * k)});
    addresses.push_back(&v[static_cast<size_t>(k)]);
  }
  REQUIRE(v.size() == 1000);
  int64_t k = 0;
  for (const Record& r : v) {  // in order, each where it was put
    CHECK(r.a == k);
    CHECK(r.b == 3 * k);
    CHECK(&r == addresses[static_cast<size_t>(k)]);
    ++k;
  }
  CHECK(k == 1000);
  v[17].b = 5;
  CHECK(v[17].b == 5);
  CHECK(v[16].b == 48);
  const optrace::detail::BlockVector<Record, 4> listed{Record{1, 2}, Record{3, 4}};
  CHECK(listed.size() == 2);
  CHECK(listed[1].a == 3);
}

TEST_CASE("BlockVector: random-access iterators across blocks, for the standard algorithms", "[common]") {
  using V = optrace::detail::BlockVector<int64_t, 4>;  // blocks of 16
  static_assert(std::is_same_v<std::iterator_traits<V::const_iterator>::iterator_category, std::random_access_iterator_tag>);
  V v;
  for (int64_t k = 0; k < 100; ++k) v.push_back(2 * k);  // 0, 2, ..., 198
  const V& c = v;
  CHECK(c.end() - c.begin() == 100);
  auto it = c.begin() + 17;  // the second block
  CHECK(*it == 34);
  CHECK(it[-2] == 30);
  CHECK(*(it - 1) == 32);
  CHECK(*(3 + it) == 40);
  CHECK(*--it == 32);
  CHECK(*it++ == 32);
  CHECK(*it == 34);
  CHECK((c.begin() < it && it <= c.end() && c.end() > it && it >= c.begin()));
  // The first element above each value, as std::upper_bound finds it in a vector, in every block.
  for (int64_t x = -1; x <= 200; ++x) {
    auto found = std::upper_bound(c.begin(), c.end(), x);
    const int64_t expected = x < 0 ? 0 : std::min<int64_t>(x / 2 + 1, 100);
    INFO(x);
    CHECK(found - c.begin() == expected);
  }
}

TEST_CASE("kineto_names: the categories libkineto writes, by their activity's name", "[common]") {
  namespace kn = optrace::detail::kineto_names;
  // libkineto/src/ActivityType.cpp's names: CONCURRENT_KERNEL is "kernel", not its enum's name.
  static_assert(kn::name(kn::Category::kernel) == "kernel");
  static_assert(kn::name(kn::Category::gpu_user_annotation) == "gpu_user_annotation");
  CHECK(kn::is("cpu_op", kn::Category::cpu_op));
  CHECK_FALSE(kn::is("cpu_op ", kn::Category::cpu_op));
  CHECK(kn::name(kn::Category::operator_legacy) == "Operator");
  CHECK(kn::name(kn::Category::trace_span) == "Trace");
}
