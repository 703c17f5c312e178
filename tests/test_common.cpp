// Tests for the foundation: optrace/error.hpp and optrace/detail/common/ (no libtorch header needed).
#include <optrace/detail/common/beneath.hpp>
#include <optrace/detail/common/block_vector.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/kineto_names.hpp>
#include <optrace/detail/common/printable.hpp>
#include <optrace/detail/common/string_map.hpp>
#include <optrace/detail/common/text_table.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

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

TEST_CASE("errors: running out of memory reading a file names the file", "[common]") {
  CHECK_THROWS_WITH(optrace::detail::about_file("f.json", []() -> int { throw std::bad_alloc(); }),
                    "optrace: f.json: IoError: not enough memory to read it");
  // The innermost file is named: a plan's observation file, not the plan.
  CHECK_THROWS_WITH(optrace::detail::about_file("plan.json", [] {
                      return optrace::detail::about_file("p0.json", []() -> int { throw std::bad_alloc(); });
                    }),
                    "optrace: p0.json: IoError: not enough memory to read it");
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

namespace {

std::string beneath_answer(const std::string& base, const std::string& name) {
  try {
    optrace::detail::Fd fd = optrace::detail::open_file_beneath(base, name);
    return "read: " + optrace::detail::read_all(fd.get(), 0, name);
  } catch (const optrace::Error& e) {
    return e.message();
  }
}

}  // namespace

// The one rule and walk for names that files optrace reads give (a plan's packages and
// observation files, an on-demand request's trace).
TEST_CASE("beneath: a name a file gives stays beneath its folder, by name and by link", "[common]") {
  namespace fs = std::filesystem;
  using optrace::detail::beneath_name_problem;
  for (const char* good : {"a", "a/b.json", "..a", "a..", "a/...b/c", "x.pt2"}) CHECK(beneath_name_problem(good).empty());
  CHECK(beneath_name_problem("") == "an empty name");
  CHECK(beneath_name_problem("/etc/x") == "an absolute path");
  CHECK(beneath_name_problem("a/../b") == "a '..' component");
  CHECK(beneath_name_problem("..") == "a '..' component");
  CHECK(beneath_name_problem("./a") == "a '.' component");
  CHECK(beneath_name_problem("a//b") == "an empty component");
  CHECK(beneath_name_problem("a/") == "an empty component");
  CHECK(beneath_name_problem("a\\..\\b") == "a backslash in the name");
  CHECK(beneath_name_problem(std::string("a\0b", 3)) == "a NUL in the name");

  const std::string dir = optrace_test::temp_path("beneath");
  optrace::detail::remove_tree(dir);
  fs::create_directories(dir + "/plan/sub");
  fs::create_directories(dir + "/outside");
  std::ofstream(dir + "/plan/sub/in.json") << "in";
  std::ofstream(dir + "/outside/secret") << "secret";
  fs::create_directory_symlink(dir + "/outside", dir + "/plan/out");
  fs::create_symlink(dir + "/outside/secret", dir + "/plan/secret.json");
  REQUIRE(::mkfifo((dir + "/plan/fifo").c_str(), 0600) == 0);
  const std::string plan = dir + "/plan";
  CHECK(beneath_answer(plan, "sub/in.json") == "read: in");
  CHECK(beneath_answer(plan, "out/secret") == "'" + plan + "/out' is a symbolic link: a file named beneath '" + plan + "' stays in it");
  CHECK(beneath_answer(plan, "secret.json") ==
        "'" + plan + "/secret.json' is a symbolic link: a file named beneath '" + plan + "' stays in it");
  CHECK(beneath_answer(plan, "../outside/secret") == "'../outside/secret' is not a file name beneath '" + plan +
                                                         "' (a '..' component)");
  CHECK(beneath_answer(plan, "fifo") == "cannot open the file: not a regular file");
  CHECK(beneath_answer(plan, "sub/missing.json").find("No such file or directory") != std::string::npos);

  // Folders made on the way, or the walk stopped where one is missing (a check before a write).
  using optrace::detail::MissingFolder;
  auto [made, leaf] = optrace::detail::open_folder_beneath(plan, "new/deeper/t.json", MissingFolder::Make);
  CHECK(made);
  CHECK(leaf == "t.json");
  CHECK(fs::is_directory(plan + "/new/deeper"));
  auto [none, name] = optrace::detail::open_folder_beneath(plan, "absent/t.json", MissingFolder::Stop);
  CHECK_FALSE(none);
  CHECK(name == "t.json");
  CHECK_FALSE(fs::exists(plan + "/absent"));
  CHECK_THROWS_WITH(optrace::detail::open_folder_beneath(plan, "out/t.json", MissingFolder::Make),
                    OPTRACE_CONTAINS("/out' is a symbolic link"));
}

// A file written atomically goes through a temporary file that nobody can plant ahead: its name
// cannot be guessed and it is created, never opened (the pid-named one was opened with O_TRUNC,
// so a hard link planted under that name had the write land in the file it links to).
TEST_CASE("remove_tree: a tree goes, what its links name stays", "[common]") {
  namespace fs = std::filesystem;
  using optrace::detail::remove_tree;
  const std::string dir = optrace_test::temp_path("remove_tree");
  REQUIRE(remove_tree(dir));
  fs::create_directories(dir + "/tree/a/b/c");
  fs::create_directories(dir + "/outside/kept");
  std::ofstream(dir + "/tree/a/b/c/deep") << "x";
  std::ofstream(dir + "/tree/top") << "x";
  std::ofstream(dir + "/outside/secret") << "secret";
  fs::create_directory_symlink(dir + "/outside", dir + "/tree/a/to_folder");
  fs::create_symlink(dir + "/outside/secret", dir + "/tree/to_file");
  REQUIRE(::mkfifo((dir + "/tree/a/fifo").c_str(), 0600) == 0);
  CHECK(remove_tree(dir + "/tree"));
  CHECK_FALSE(fs::exists(fs::symlink_status(dir + "/tree")));
  CHECK(fs::exists(dir + "/outside/secret"));
  CHECK(fs::exists(dir + "/outside/kept"));
  CHECK(remove_tree(dir + "/tree"));  // nothing there: done
  // A link as the root goes itself; a file too.
  fs::create_directory_symlink(dir + "/outside", dir + "/root_link");
  CHECK(remove_tree(dir + "/root_link"));
  CHECK(fs::exists(dir + "/outside/kept"));
  CHECK(remove_tree(dir + "/outside/secret"));
  CHECK_FALSE(fs::exists(dir + "/outside/secret"));
  // A folder it may not empty: false, and what it could not remove stays.
  if (::geteuid() != 0) {
    fs::create_directories(dir + "/locked/in");
    std::ofstream(dir + "/locked/in/f") << "x";
    fs::permissions(dir + "/locked/in", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_FALSE(remove_tree(dir + "/locked"));
    CHECK(fs::exists(dir + "/locked/in/f"));
    fs::permissions(dir + "/locked/in", fs::perms::owner_all);
  }
  CHECK(remove_tree(dir));
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("atomic writes: a link planted under the temporary file's old name is not written through", "[common]") {
  namespace fs = std::filesystem;
  const std::string dir = optrace_test::temp_path("atomic_plant");
  optrace::detail::remove_tree(dir);
  fs::create_directories(dir + "/out");
  std::ofstream(dir + "/victim") << "keep me";
  const std::string target = dir + "/out/plan.json";
  REQUIRE(::link((dir + "/victim").c_str(), (target + ".tmp." + std::to_string(::getpid())).c_str()) == 0);
  optrace::detail::write_file_atomic(target, "the plan");
  CHECK(optrace::detail::read_file(dir + "/victim") == "keep me");
  CHECK(optrace::detail::read_file(target) == "the plan");
  CHECK(optrace::detail::temporary_name("x") != optrace::detail::temporary_name("x"));
  // Kept: nothing replaces an existing file, and no temporary file is left behind.
  CHECK_THROWS_WITH(optrace::detail::write_file_atomic(target, "again", optrace::detail::ExistingFile::Keep),
                    OPTRACE_CONTAINS("exists and is kept"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir + "/out")) files += e.path().filename().string().rfind("plan.json.tmp.", 0) == 0;
  CHECK(files == 1);  // the planted link only
}

TEST_CASE("can_create_beside: the probe neither truncates nor follows what is planted beside it", "[common]") {
  namespace fs = std::filesystem;
  const std::string dir = optrace_test::temp_path("probe_plant");
  optrace::detail::remove_tree(dir);
  fs::create_directories(dir + "/out");
  std::ofstream(dir + "/victim") << "keep me";
  // The fixed names the profiler's and the CLI's probes had: a hard link and a symbolic link.
  REQUIRE(::link((dir + "/victim").c_str(), (dir + "/out/.optrace-write-check").c_str()) == 0);
  REQUIRE(::symlink((dir + "/victim").c_str(), (dir + "/out/t.json.optrace-probe." + std::to_string(::getpid())).c_str()) == 0);
  using optrace::detail::FileTarget;
  CHECK(optrace::detail::can_create_beside(FileTarget::path(dir + "/out/.optrace-write-check")) == 0);
  CHECK(optrace::detail::can_create_beside(FileTarget::path(dir + "/out/t.json")) == 0);
  CHECK(optrace::detail::read_file(dir + "/victim") == "keep me");
  CHECK(optrace::detail::can_create_beside(FileTarget::path(dir + "/missing/t.json")) == ENOENT);
  CHECK(std::distance(fs::directory_iterator(dir + "/out"), fs::directory_iterator()) == 2);  // the planted links only
}

TEST_CASE("printable: control bytes, C1 controls and bytes that are not UTF-8 are escaped, and UTF-8 passes", "[common]") {
  using optrace::detail::printable;
  CHECK(printable("rank0.pt.trace.json") == "rank0.pt.trace.json");
  CHECK(printable("gloo\nrank 9: forged") == "gloo\\nrank 9: forged");
  CHECK(printable("a\tb\rc\x1b[2Jd\x7f") == "a\\tb\\rc\\x1b[2Jd\\x7f");
  CHECK(printable("r\xff.json") == "r\\xff.json");
  CHECK(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
  CHECK(printable("\xc2\x9b") == "\\xc2\\x9b");                  // U+009B, a terminal's CSI
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                  // an overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");          // a surrogate
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");                  // cut short
  CHECK(printable(std::string_view("a\0b", 3)) == "a\\x00b");
  // A table escapes its cells: a name cannot forge a row.
  optrace::detail::TextTable t({"name", "n"});
  t.row({"x\nforged  1", "2"});
  std::ostringstream out;
  t.print(out);
  CHECK(out.str() == "name          n\nx\\nforged  1  2\n");
}
