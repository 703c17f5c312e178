// Tests for optrace/json/writer.hpp and optrace/error.hpp.
#include <optrace/error.hpp>
#include <optrace/json/writer.hpp>

#include <limits>

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

TEST_CASE("errors: message format and nesting", "[json]") {
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

TEST_CASE("errors: the bare message and a JSON path re-rooted without parsing text", "[json]") {
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
