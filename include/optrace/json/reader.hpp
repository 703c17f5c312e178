// optrace/json/reader.hpp: parsed JSON documents (simdjson DOM) with Python's NaN/Infinity tokens and path-naming errors
#pragma once

#include <optrace/detail/common/io.hpp>
#include <optrace/detail/common/json_text.hpp>
#include <optrace/error.hpp>

#include <simdjson.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace optrace::json {

class Document;

/// One node (a value at some place) of a parsed `Document`: a cheap handle (24 bytes) valid while
/// its document lives.
/// Typed accessors throw `optrace::JsonError` naming the value's JSON pointer and what was
/// found instead, e.g. `optrace: JsonError at /a/0: expected an integer, got string "abc"`.
/// The path is worked out only when an error is raised.
class Node {
 public:
  Node(simdjson::dom::element element, const Document* doc) : element_(element), doc_(doc) {}

  bool is_null() const { return element_.is_null(); }
  bool is_bool() const { return element_.is_bool(); }
  /// True for an integer that fits int64 (`3`, not `3.0`).
  bool is_int() const { return element_.is_int64(); }
  /// True for any number, including Python's `NaN`, `Infinity` and `-Infinity`.
  bool is_number() const { return element_.is_number() || is_special_float(); }
  /// True for a string (Python's float tokens are numbers, not strings).
  bool is_string() const { return element_.is_string() && !is_special_float(); }
  bool is_array() const { return element_.is_array(); }
  bool is_object() const { return element_.is_object(); }

  /// The boolean. Throws JsonError unless this is `true` or `false`.
  bool as_bool() const {
    bool b;
    if (element_.get_bool().get(b)) fail("expected a boolean");
    return b;
  }
  /// The integer. Throws JsonError unless this is an integer that fits int64.
  int64_t as_int() const {
    int64_t i;
    if (element_.get_int64().get(i)) fail("expected an integer");
    return i;
  }
  /// The number as a double (integers converted; NaN/Infinity/-Infinity accepted).
  /// Throws JsonError for anything else.
  double as_double() const {
    double d;
    if (!element_.get_double().get(d)) return d;
    std::string_view s;
    if (!element_.get_string().get(s) && detail::is_special_float(s)) return detail::special_float_value(s);
    fail("expected a number");
  }
  /// The string, valid while the document lives. Throws JsonError unless this is a string.
  std::string_view as_string() const {
    std::string_view s;
    if (element_.get_string().get(s) || detail::is_special_float(s)) fail("expected a string");
    return s;
  }
  /// A list of integers (`[1, 3, 224, 224]`). Throws JsonError naming the list, or the bad element.
  std::vector<int64_t> as_int_list() const {
    simdjson::dom::array array;
    if (element_.get_array().get(array)) fail("expected a list of integers");
    std::vector<int64_t> out;
    out.reserve(array.size());
    for (simdjson::dom::element e : array) {
      int64_t i;
      if (e.get_int64().get(i)) Node(e, doc_).fail("expected an integer");
      out.push_back(i);
    }
    return out;
  }

  /// Iterates an array: `for (json::Node v : node.array()) ...`. Throws JsonError unless an array.
  class Array;
  Array array() const;
  /// Iterates an object's members in document order: `for (auto [key, v] : value.object()) ...`.
  /// Throws JsonError unless an object.
  class Object;
  Object object() const;

  /// The member `key` of this object. Throws JsonError if this is not an object or has no such
  /// member (`missing key "count"`).
  Node operator[](std::string_view key) const;
  /// The member `key`, or `std::nullopt`-like `found == false`. Throws JsonError unless an object.
  bool find(std::string_view key, Node& out) const;
  /// Number of elements of an array or members of an object; throws JsonError otherwise.
  size_t size() const;

  /// The JSON pointer of this value (`/convolution.default/unique_inputs/3`); "" for the root.
  /// Walks the document to find it: meant for error messages.
  std::string path() const;
  /// A short description for messages: `string "abc"`, `integer 3`, `number 1.5`, `NaN`,
  /// `null`, `true`, `a list of 2`, `an object`.
  std::string describe() const;
  /// Throws `JsonError(path(), message + ", got " + describe())`.
  [[noreturn]] void fail(const std::string& message) const {
    optrace::detail::raise_json(path(), message + ", got " + describe());
  }
  /// Throws `JsonError(path(), message)` as given.
  [[noreturn]] void fail_plain(const std::string& message) const { optrace::detail::raise_json(path(), message); }

  const simdjson::dom::element& element() const { return element_; }

 private:
  bool is_special_float() const {
    std::string_view s;
    return !element_.get_string().get(s) && detail::is_special_float(s);
  }

  simdjson::dom::element element_;
  const Document* doc_;
};

class Node::Array {
 public:
  class iterator {
   public:
    iterator(simdjson::dom::array::iterator it, const Document* doc) : it_(it), doc_(doc) {}
    Node operator*() const { return Node(*it_, doc_); }
    iterator& operator++() { ++it_; return *this; }
    bool operator!=(const iterator& o) const { return it_ != o.it_; }
   private:
    simdjson::dom::array::iterator it_;
    const Document* doc_;
  };
  Array(simdjson::dom::array a, const Document* doc) : array_(a), doc_(doc) {}
  iterator begin() const { return iterator(array_.begin(), doc_); }
  iterator end() const { return iterator(array_.end(), doc_); }
  size_t size() const { return array_.size(); }
 private:
  simdjson::dom::array array_;
  const Document* doc_;
};

class Node::Object {
 public:
  class iterator {
   public:
    iterator(simdjson::dom::object::iterator it, const Document* doc) : it_(it), doc_(doc) {}
    std::pair<std::string_view, Node> operator*() const { return {it_.key(), Node(it_.value(), doc_)}; }
    iterator& operator++() { ++it_; return *this; }
    bool operator!=(const iterator& o) const { return it_ != o.it_; }
   private:
    simdjson::dom::object::iterator it_;
    const Document* doc_;
  };
  Object(simdjson::dom::object o, const Document* doc) : object_(o), doc_(doc) {}
  iterator begin() const { return iterator(object_.begin(), doc_); }
  iterator end() const { return iterator(object_.end(), doc_); }
  size_t size() const { return object_.size(); }
 private:
  simdjson::dom::object object_;
  const Document* doc_;
};

/// A parsed JSON document (simdjson DOM). Accepts Python's `NaN`, `Infinity` and `-Infinity`.
/// Not copyable or movable (values point into it); hold it in a `std::unique_ptr` to pass it on.
///
/// Example:
///   auto doc = json::Document::parse(R"({"xs": [1, 2, NaN]})");
///   for (json::Node v : doc->root()["xs"].array()) double d = v.as_double();
class Document {
 public:
  /// Parses `text`. Throws JsonError at "" for malformed or truncated input, naming simdjson's
  /// complaint in words (never its error code).
  static std::unique_ptr<Document> parse(std::string_view text) {
    std::unique_ptr<Document> doc(new Document());
    if (!detail::rewrite_python_floats(text, doc->buffer_, /*exact=*/false)) {
      doc->buffer_.reserve(text.size() + simdjson::SIMDJSON_PADDING);
      doc->buffer_.assign(text.data(), text.size());
      doc->parse_buffer();
      return doc;
    }
    if (doc->try_parse_buffer()) {
      doc->refuse_duplicate_keys();
      return doc;
    }
    // The fast rewrite touched a string (or the text is malformed): redo it tracking strings.
    detail::rewrite_python_floats(text, doc->buffer_, /*exact=*/true);
    doc->parse_buffer();
    return doc;
  }
  /// Reads and parses the file at `path`. Throws IoError if it cannot be read, JsonError as
  /// `parse`; either names the file (`Error::file()`).
  static std::unique_ptr<Document> load(const std::string& path) {
    return optrace::detail::about_file(path, [&] { return load_unnamed(path); });
  }

  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  /// The top-level value.
  Node root() const { return Node(root_, this); }

  /// The JSON pointer of `target` (see `Node::path`); "?" if it is not in this document.
  std::string path_of(const simdjson::dom::element& target) const {
    std::string path;
    if (find_path(root_, target, path)) return path;
    return "?";
  }

 private:
  Document() : parser_(take_parser()) {}

  // Small documents are parsed by the thousand (a Kineto importer parses each distinct input's
  // fields): a parser and its buffers are kept per thread for the next document rather than
  // allocated and freed each time. Parsers grown past kKeptCapacity are freed (a large file's
  // buffers are not held after its document); at most kKept are kept.
  static constexpr size_t kKept = 4, kKeptCapacity = size_t(1) << 20;
  struct KeptParsers {
    std::vector<std::unique_ptr<simdjson::dom::parser>> parsers;
    ~KeptParsers() { gone() = true; }
    // A Document destroyed after this thread's KeptParsers (one in a static) keeps nothing: a
    // flag with no destructor says so.
    static bool& gone() {
      thread_local bool flag = false;
      return flag;
    }
  };
  static KeptParsers* kept_parsers() {
    thread_local KeptParsers kept;
    return KeptParsers::gone() ? nullptr : &kept;
  }
  static std::unique_ptr<simdjson::dom::parser> take_parser() {
    KeptParsers* kept = kept_parsers();
    if (kept == nullptr || kept->parsers.empty()) return std::make_unique<simdjson::dom::parser>();
    std::unique_ptr<simdjson::dom::parser> p = std::move(kept->parsers.back());
    kept->parsers.pop_back();
    return p;
  }

 public:
  ~Document() {
    if (!parser_ || parser_->capacity() > kKeptCapacity) return;
    KeptParsers* kept = kept_parsers();
    if (kept != nullptr && kept->parsers.size() < kKept) kept->parsers.push_back(std::move(parser_));
  }

 private:

  static std::unique_ptr<Document> load_unnamed(const std::string& path) {
    // Mapped when large (FileBytes): no copy of the file and no page faults of a fresh buffer.
    // Without Python's float tokens the bytes are parsed in place (they are followed by the zeros
    // simdjson reads past the end); with them, the rewrite is the only copy.
    auto file = std::make_unique<optrace::detail::FileBytes>(path, simdjson::SIMDJSON_PADDING);
    if (file->data() != nullptr) {
      std::string_view view(file->data(), file->size());
      if (detail::has_float_tokens(view)) return parse(view);
      std::unique_ptr<Document> doc(new Document());
      doc->file_ = std::move(file);
      doc->parse_padded(doc->file_->data(), doc->file_->size());
      return doc;
    }
    // Not had by FileBytes (an empty file; read_file refuses what is not a regular file): read it.
    std::unique_ptr<Document> doc(new Document());
    std::string text = optrace::detail::read_file(path, simdjson::SIMDJSON_PADDING);
    std::string_view view(text);
    if (!detail::has_float_tokens(view)) {
      doc->buffer_ = std::move(text);  // already padded: parsed in place
      doc->parse_buffer();
      return doc;
    }
    return parse(view);
  }

  // simdjson reads up to SIMDJSON_PADDING bytes past the end: buffer_'s capacity covers them.
  bool try_parse_buffer() {
    if (buffer_.capacity() < buffer_.size() + simdjson::SIMDJSON_PADDING) buffer_.reserve(buffer_.size() + simdjson::SIMDJSON_PADDING);
    return !parser_->parse(buffer_.data(), buffer_.size(), false).get(root_);
  }
  void parse_buffer() {
    if (buffer_.capacity() < buffer_.size() + simdjson::SIMDJSON_PADDING) buffer_.reserve(buffer_.size() + simdjson::SIMDJSON_PADDING);
    parse_padded(buffer_.data(), buffer_.size());
  }
  // `text` must stay readable SIMDJSON_PADDING bytes past `size`, and live as long as this document.
  void parse_padded(const char* text, size_t size) {
    auto error = parser_->parse(text, size, false).get(root_);
    if (error) optrace::detail::raise_json("", "malformed JSON: " + detail::simdjson_message(error));
    refuse_duplicate_keys();
  }

  // A key given twice in one object means two things: simdjson's lookup (and so every optrace
  // reader) takes the first value, Python's json the last. Such a document is refused at the
  // second one's path, whatever reader asked: one rule for every DOM reader. Objects of up to 8
  // keys are compared pairwise, larger ones through a set, so the walk is linear.
  void refuse_duplicate_keys() const {
    simdjson::dom::element second;
    if (first_duplicate(root_, second))
      optrace::detail::raise_json(path_of(second), detail::kDuplicateKey);
  }
  static bool first_duplicate(const simdjson::dom::element& at, simdjson::dom::element& second) {
    using simdjson::dom::element_type;
    simdjson::dom::array array;
    if (at.type() == element_type::ARRAY && !at.get_array().get(array)) {
      for (simdjson::dom::element e : array)
        if (first_duplicate(e, second)) return true;
      return false;
    }
    simdjson::dom::object object;
    if (at.type() != element_type::OBJECT || at.get_object().get(object)) return false;
    constexpr size_t kPairwise = 8;
    std::string_view keys[kPairwise];
    size_t n = 0;
    std::unique_ptr<std::unordered_set<std::string_view>> seen;
    for (auto field : object) {
      bool repeated = false;
      if (seen) {
        repeated = !seen->insert(field.key).second;
      } else {
        for (size_t i = 0; i < n && !repeated; ++i) repeated = keys[i] == field.key;
        if (n < kPairwise) {
          keys[n++] = field.key;
        } else if (!repeated) {
          seen = std::make_unique<std::unordered_set<std::string_view>>(keys, keys + n);
          seen->insert(field.key);
        }
      }
      if (repeated) {
        second = field.value;
        return true;
      }
      if (first_duplicate(field.value, second)) return true;
    }
    return false;
  }

  static bool same(const simdjson::dom::element& a, const simdjson::dom::element& b) {
    // An element is a (document, tape index) pair: equal bytes mean the same value.
    static_assert(std::is_trivially_copyable_v<simdjson::dom::element>);
    return std::memcmp(&a, &b, sizeof a) == 0;
  }

  static bool find_path(const simdjson::dom::element& at, const simdjson::dom::element& target, std::string& path) {
    if (same(at, target)) return true;
    size_t keep = path.size();
    simdjson::dom::array array;
    simdjson::dom::object object;
    if (!at.get_array().get(array)) {
      size_t i = 0;
      for (simdjson::dom::element e : array) {
        path += '/';
        path += std::to_string(i++);
        if (find_path(e, target, path)) return true;
        path.resize(keep);
      }
    } else if (!at.get_object().get(object)) {
      for (auto field : object) {
        detail::append_pointer_segment(path, field.key);
        if (find_path(field.value, target, path)) return true;
        path.resize(keep);
      }
    }
    return false;
  }

  std::string buffer_;  // the text parsed, capacity padded; or empty, and
  std::unique_ptr<optrace::detail::FileBytes> file_;  // the file parsed in place
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
};

inline Node::Array Node::array() const {
  simdjson::dom::array a;
  if (element_.get_array().get(a)) fail("expected a list");
  return Array(a, doc_);
}

inline Node::Object Node::object() const {
  simdjson::dom::object o;
  if (element_.get_object().get(o)) fail("expected an object");
  return Object(o, doc_);
}

inline bool Node::find(std::string_view key, Node& out) const {
  simdjson::dom::object o;
  if (element_.get_object().get(o)) fail("expected an object");
  simdjson::dom::element e;
  if (o.at_key(key).get(e)) return false;
  out = Node(e, doc_);
  return true;
}

inline Node Node::operator[](std::string_view key) const {
  Node out(element_, doc_);
  if (!find(key, out)) fail_plain("missing key \"" + std::string(key) + "\"");
  return out;
}

inline size_t Node::size() const {
  simdjson::dom::array a;
  if (!element_.get_array().get(a)) return a.size();
  simdjson::dom::object o;
  if (!element_.get_object().get(o)) return o.size();
  fail("expected a list or an object");
}

inline std::string Node::path() const { return doc_ ? doc_->path_of(element_) : std::string("?"); }

inline std::string Node::describe() const {
  using simdjson::dom::element_type;
  switch (element_.type()) {
    case element_type::NULL_VALUE: return "null";
    case element_type::BOOL: return element_.get_bool().value_unsafe() ? "true" : "false";
    case element_type::INT64: return "integer " + std::to_string(element_.get_int64().value_unsafe());
    case element_type::UINT64: return "integer " + std::to_string(element_.get_uint64().value_unsafe());
    case element_type::DOUBLE: return detail::describe_number(element_.get_double().value_unsafe());
    case element_type::STRING: {
      std::string_view s = element_.get_string().value_unsafe();
      if (detail::is_special_float(s)) return std::string(s.substr(1));
      return detail::describe_string(s);
    }
    case element_type::ARRAY: return detail::describe_list(element_.get_array().value_unsafe().size());
    case element_type::OBJECT: return "an object";
  }
  return "an unknown value";
}

}  // namespace optrace::json
