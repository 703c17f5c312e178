// Tests for optrace/json/writer.hpp and optrace/json/reader.hpp.
#include <optrace/json/reader.hpp>
#include <optrace/json/writer.hpp>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "optrace_catch.hpp"

TEST_CASE("json writer: numbers as Python writes them", "[json]") {
  optrace::json::Writer w;
  w.begin_array()
      .value(1.0)
      .value(0.1)
      .value(-std::numeric_limits<double>::infinity())
      .value(std::numeric_limits<double>::infinity())
      .value(std::numeric_limits<double>::quiet_NaN())
      .value(int64_t{-3})
      .value(1e-5)
      .value(true)
      .null()
      .end_array();
  CHECK(w.str() == "[1.0, 0.1, -Infinity, Infinity, NaN, -3, 1e-05, true, null]");
}

TEST_CASE("json writer: nesting and escapes", "[json]") {
  optrace::json::Writer w;
  w.begin_object().key("a\"b").begin_array().end_array().key("c").begin_object().key("d").value("x\n").end_object().end_object();
  CHECK(w.str() == R"({"a\"b": [], "c": {"d": "x\n"}})");
  optrace::json::Writer pretty(1);
  pretty.begin_object().key("a").begin_array().value(1).value(2).end_array().end_object();
  CHECK(pretty.str() == "{\n \"a\": [\n  1,\n  2\n ]\n}");
}

TEST_CASE("json writer: bytes that are not UTF-8 become U+FFFD, so the output parses", "[json]") {
  CHECK(optrace::json::Writer().value("a\xff" "b").str() == "\"a\xEF\xBF\xBD" "b\"");
  CHECK(optrace::json::Writer().value("\xe2\x82\xac \xe2\x82").str() == "\"\xe2\x82\xac \xEF\xBF\xBD\xEF\xBF\xBD\"");
  CHECK(optrace::json::Writer().value("caf\xc3\xa9").str() == "\"caf\xc3\xa9\"");
  const std::string written = optrace::json::Writer().value("r\xff\xc0\xaf.json").str();
  CHECK(optrace::json::Document::parse(written)->root().as_string() == "r\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD.json");
}

TEST_CASE("json reader: float tokens inside strings stay strings", "[json]") {
  // Patterns that look like bare tokens force the exact (string-tracking) rewrite.
  auto doc = optrace::json::Document::parse(R"(["x, NaN, y", "[Infinity]", "a\", -Infinity", NaN, "k: -Infinity}"])");
  std::vector<std::string> got;
  for (optrace::json::Node v : doc->root().array()) got.push_back(v.is_string() ? std::string(v.as_string()) : v.describe());
  CHECK(got == std::vector<std::string>{"x, NaN, y", "[Infinity]", "a\", -Infinity", "NaN", "k: -Infinity}"});
}

TEST_CASE("json reader: typed accessors and paths", "[json]") {
  auto doc = optrace::json::Document::parse(R"({"a": [1, -Infinity, "NaN", {"b/": [true]}], "s": "x\"y"})");
  optrace::json::Node root = doc->root();
  optrace::json::Node a = root["a"];
  CHECK(a.size() == 4);
  CHECK(a.path() == "/a");
  std::vector<optrace::json::Node> items;
  for (optrace::json::Node v : a.array()) items.push_back(v);
  CHECK(items[0].as_int() == 1);
  CHECK(items[0].as_double() == 1.0);
  CHECK(items[1].is_number());
  CHECK(!items[1].is_string());
  CHECK(items[1].as_double() == -std::numeric_limits<double>::infinity());
  CHECK(items[2].as_string() == "NaN");
  CHECK(items[3]["b/"].path() == "/a/3/b~1");
  CHECK_THROWS_WITH(items[3]["b/"].array().begin().operator*().as_int(),
                    "optrace: JsonError at /a/3/b~1/0: expected an integer, got true");
  CHECK_THROWS_WITH(items[1].as_string(), "optrace: JsonError at /a/1: expected a string, got -Infinity");
  CHECK_THROWS_WITH(root["s"].as_double(), "optrace: JsonError at /s: expected a number, got string \"x\"y\"");
  CHECK_THROWS_WITH(a.as_int_list(), "optrace: JsonError at /a/1: expected an integer, got -Infinity");
  CHECK_THROWS_WITH(root["zz"], "optrace: JsonError at /: missing key \"zz\"");
  CHECK_THROWS_WITH(root.as_bool(), "optrace: JsonError at /: expected a boolean, got an object");
  int keys = 0;
  for (auto [k, v] : root.object()) keys += static_cast<int>(k.size()) + (v.is_array() ? 10 : 0);
  CHECK(keys == 12);
}

// Python's json keeps a repeated key's last value, simdjson's lookup the first: every DOM reader
// refuses the document, at the second one, small object or large, parsed or loaded.
TEST_CASE("json reader: a key given twice in one object is refused at its path", "[json]") {
  using optrace::json::Document;
  const std::string why = ": a key given twice in one object (JSON readers differ on which value they take)";
  CHECK_THROWS_WITH(Document::parse(R"({"a": 1, "b": {"x": 5, "x": 6}})"), "optrace: JsonError at /b/x" + why);
  CHECK_THROWS_WITH(Document::parse(R"([{"k": 1}, {"k": 2, "j": [{"x": 1, "y": NaN, "y": 2}]}])"),
                    "optrace: JsonError at /1/j/0/y" + why);  // NaN: the rewriting parse checks too
  std::string wide = "{";
  for (int i = 0; i < 40; ++i) wide += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  CHECK_NOTHROW(Document::parse(wide + "\"last\": 0}"));
  CHECK_THROWS_WITH(Document::parse(wide + "\"k31\": 0}"), "optrace: JsonError at /k31" + why);
  CHECK_THROWS_WITH(Document::parse(R"({"k0": 0, "k1": 0, "k2": 0, "k3": 0, "k4": 0, "k5": 0, "k6": 0, "k7": 0, "k7": 1})"),
                    "optrace: JsonError at /k7" + why);
  // Equal keys only: distinct ones that share a prefix or differ in case are kept.
  CHECK(Document::parse(R"({"x": 1, "X": 2, "xx": 3})")->root()["X"].as_int() == 2);
  const std::string path = optrace_test::temp_path("json_duplicate.json");
  optrace::detail::write_file_atomic(path, R"({"format": 1, "format": 2})");
  CHECK_THROWS_WITH(Document::load(path), "optrace: " + path + ": JsonError at /format" + why);
}

TEST_CASE("json::Document: parsers are reused, documents stay independent", "[json]") {
  // Parsers of destroyed documents are kept for the next ones: a document must never see another's
  // values, whatever the order they are made and destroyed in.
  std::vector<std::unique_ptr<optrace::json::Document>> docs;
  for (int k = 0; k < 20; ++k) {
    docs.push_back(optrace::json::Document::parse("{\"k\": " + std::to_string(k) + ", \"s\": \"" + std::string(k * 50, 'x') + "\"}"));
    if (k % 3 == 2) docs.erase(docs.begin());
  }
  for (const auto& d : docs) {
    const int64_t k = d->root()["k"].as_int();
    CHECK(d->root()["s"].as_string().size() == static_cast<size_t>(k * 50));
  }
  docs.clear();
  // A large document after small ones, and small ones after it.
  std::string big = "[";
  for (int k = 0; k < 300000; ++k) big += (k ? ",\"" : "\"") + std::to_string(k) + "\"";
  big += "]";
  CHECK(optrace::json::Document::parse(big)->root().array().size() == 300000);
  CHECK(optrace::json::Document::parse("[1, 2]")->root().array().size() == 2);
}
