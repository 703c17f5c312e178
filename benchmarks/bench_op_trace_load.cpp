// bench_op_trace_load: loading a large hf_op_trace.json with OpTrace::load, against simdjson
// walking every value of the same document and Python's json.load (Debian's python3, run as a
// subprocess in the same run).
//
// OpTrace::load streams the file (stream_reader.hpp); the same file mapped and read at once (its
// path before streaming) is timed too.
//
// Usage: bench_op_trace_load [path=/tmp/optrace_big_trace.json] [megabytes=110] [python=/usr/bin/python3]
// Generates the file first if it is missing or smaller than asked: realistic entries (convolution,
// addmm, masked_fill with -inf, cat of tensor lists, embedding, softmax, ...) with shapes varied
// until the file reaches the size.
#include <optrace/op_trace.hpp>

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <sys/stat.h>

namespace {

using optrace::OpInput;
using optrace::OpValue;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

OpInput tensor_args(std::vector<std::vector<int64_t>> shapes) {
  OpInput in;
  for (auto& s : shapes) {
    in.input_shapes.emplace_back(std::move(s));
    in.input_dtypes.emplace_back("torch.float32");
    in.non_tensor_inputs.emplace_back();
  }
  return in;
}

void add_scalar(OpInput& in, OpValue v, const char* type) {
  in.input_shapes.emplace_back();
  in.input_dtypes.emplace_back(type);
  in.non_tensor_inputs.push_back(std::move(v));
}

OpValue ints(std::vector<int64_t> xs) {
  std::vector<OpValue> out;
  for (int64_t x : xs) out.push_back(OpValue::integer(x));
  return OpValue::list(std::move(out));
}

// One round of realistic unique inputs, shapes varied by `i`.
void add_round(optrace::OpTrace& trace, int64_t i) {
  // `s` grows with i: every round adds new unique inputs, as a long varied workload does.
  int64_t b = 1 + i % 32, s = 16 + i, c = 64 * (1 + i % 16), h = 7 + i % 57;
  OpInput conv = tensor_args({{b, c, h, s}, {c * 2, c, 3, 3}, {c * 2}});
  add_scalar(conv, ints({1, 1}), "<class 'list'>");
  add_scalar(conv, ints({1, 1}), "<class 'list'>");
  add_scalar(conv, ints({1, 1}), "<class 'list'>");
  add_scalar(conv, OpValue::boolean(false), "<class 'bool'>");
  add_scalar(conv, ints({0, 0}), "<class 'list'>");
  add_scalar(conv, OpValue::integer(1), "<class 'int'>");
  conv.count = 1 + i % 5;
  trace.add("convolution.default", conv);
  OpInput mm = tensor_args({{c}, {b * s, c}, {c, c * 4}});
  mm.count = 2 + i % 3;
  trace.add("addmm.default", mm);
  OpInput fill = tensor_args({{b, 12, s, s}, {b, 1, s, s}});
  fill.input_dtypes[1] = "torch.bool";
  add_scalar(fill, OpValue::floating(-std::numeric_limits<double>::infinity()), "<class 'float'>");
  trace.add("masked_fill.Scalar", fill);
  OpInput cat;
  cat.input_shapes = {std::nullopt, std::nullopt};
  cat.input_dtypes = {"<class 'list'>", "<class 'int'>"};
  cat.non_tensor_inputs = {OpValue::tensor_list_ref(0), OpValue::integer(-1)};
  optrace::TensorListInfo list;
  for (int k = 0; k < 3; ++k) {
    list.shapes.emplace_back(std::vector<int64_t>{b, c, h, s + k});
    list.dtypes.emplace_back("torch.float32");
  }
  cat.tensor_lists.emplace_back("0", std::move(list));
  trace.add("cat.default", cat);
  OpInput emb = tensor_args({{32000 + i % 100, c}, {b, s}});
  emb.input_dtypes[1] = "torch.int64";
  trace.add("embedding.default", emb);
  OpInput soft = tensor_args({{b, 12, s, s}});
  add_scalar(soft, OpValue::integer(-1), "<class 'int'>");
  add_scalar(soft, OpValue::boolean(false), "<class 'bool'>");
  trace.add("_softmax.default", soft);
  OpInput mul = tensor_args({{b, s, c}});
  add_scalar(mul, OpValue::floating(0.125 * (1 + i % 9)), "<class 'float'>");
  trace.add("mul.Tensor", mul);
  OpInput to = tensor_args({{b, s, c}});
  add_scalar(to, OpValue::string("torch.float16"), "<class 'torch.dtype'>");
  trace.add("view.dtype", to);
}

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

void generate(const std::string& path, int64_t bytes) {
  // Measure the JSON size of a sample, then add rounds until the estimate passes `bytes`.
  optrace::OpTrace trace;
  int64_t i = 0;
  for (; i < 2000; ++i) add_round(trace, i);
  double per_round = static_cast<double>(trace.to_json().size()) / static_cast<double>(i);
  while (true) {
    int64_t target = static_cast<int64_t>(static_cast<double>(bytes) / per_round * 1.02) + 1;
    for (; i < target; ++i) add_round(trace, i);
    std::string js = trace.to_json();
    if (static_cast<int64_t>(js.size()) >= bytes) {
      optrace::detail::write_file_atomic(path, js);
      return;
    }
    per_round = static_cast<double>(js.size()) / static_cast<double>(i);
  }
}

// Counts every value simdjson sees, reading each number and string.
size_t walk(simdjson::dom::element e, double& sum) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      size_t n = 1;
      simdjson::dom::array array = e.get_array().value_unsafe();
      for (auto v : array) n += walk(v, sum);
      return n;
    }
    case simdjson::dom::element_type::OBJECT: {
      size_t n = 1;
      simdjson::dom::object object = e.get_object().value_unsafe();
      for (auto f : object) n += walk(f.value, sum) + (f.key.size() > 0);
      return n;
    }
    case simdjson::dom::element_type::INT64: sum += static_cast<double>(e.get_int64().value_unsafe()); return 1;
    case simdjson::dom::element_type::DOUBLE: sum += e.get_double().value_unsafe(); return 1;
    case simdjson::dom::element_type::STRING: sum += static_cast<double>(e.get_string().value_unsafe().size()); return 1;
    default: return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "/tmp/optrace_big_trace.json";
  int64_t megabytes = argc > 2 ? std::atoll(argv[2]) : 110;
  std::string python = argc > 3 ? argv[3] : "/usr/bin/python3";
  if (file_size(path) < megabytes * 1000000) {
    auto t = std::chrono::steady_clock::now();
    generate(path, megabytes * 1000000);
    std::printf("generated %s in %.1f s\n", path.c_str(), seconds_since(t));
  }
  double mb = static_cast<double>(file_size(path)) / 1e6;
  std::printf("file: %s, %.1f MB\n", path.c_str(), mb);

  double load = 1e30;
  optrace::OpTrace trace;
  for (int r = 0; r < 3; ++r) {
    trace = optrace::OpTrace();  // free the previous round's trace before timing, as json.load's timing frees nothing
    auto t = std::chrono::steady_clock::now();
    trace = optrace::OpTrace::load(path);
    load = std::min(load, seconds_since(t));
  }
  std::printf("OpTrace::load:            %7.3f s  (%.0f MB/s; %lld ops, %lld unique inputs, %lld calls)\n", load, mb / load,
              static_cast<long long>(trace.size()), static_cast<long long>(trace.unique_input_count()),
              static_cast<long long>(trace.total_calls()));

  // What load did before it streamed large files, best of 3: the file mapped and read at once.
  double mapped = 1e30;
  for (int r = 0; r < 3; ++r) {
    trace = optrace::OpTrace();
    auto t = std::chrono::steady_clock::now();
    optrace::detail::FileBytes file(path, simdjson::SIMDJSON_PADDING);
    auto ops = optrace::detail::op_trace::FastReader::read(file.data(), file.size(), file.capacity());
    if (!ops) return 1;
    trace = optrace::OpTrace::from_entries(std::move(*ops));
    mapped = std::min(mapped, seconds_since(t));
  }
  std::printf("mapped, read at once:     %7.3f s  (load streams files of 4 MiB or more: %.2fx this)\n", mapped, load / mapped);

  // simdjson cannot read Python's -Infinity: walk the rewritten text (rewrite not timed).
  std::string text = optrace::detail::read_file(path), rewritten;
  if (optrace::json::detail::rewrite_python_floats(text, rewritten)) text.swap(rewritten);
  simdjson::padded_string padded(text);
  simdjson::dom::parser parser;
  double walk_s = 1e30, sum = 0;
  size_t values = 0;
  for (int r = 0; r < 3; ++r) {
    auto t = std::chrono::steady_clock::now();
    simdjson::dom::element root;
    if (parser.parse(padded).get(root)) return 1;
    values = walk(root, sum);
    walk_s = std::min(walk_s, seconds_since(t));
  }
  std::printf("simdjson parse + walk:    %7.3f s  (%zu values)\n", walk_s, values);

  std::string cmd = python +
                    " -c 'import json, sys, time\nt = time.perf_counter()\nwith open(sys.argv[1]) as f: json.load(f)\n"
                    "print(time.perf_counter() - t)' " +
                    path;
  double py = -1;
  if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
    if (std::fscanf(p, "%lf", &py) != 1) py = -1;
    ::pclose(p);
  }
  if (py > 0) std::printf("python3 json.load:        %7.3f s\n", py);
  else std::printf("python3 json.load:        (could not run %s)\n", python.c_str());
  std::printf("OpTrace::load vs simdjson walk: %.2fx slower (target <= 4x)\n", load / walk_s);
  if (py > 0) std::printf("OpTrace::load vs json.load:     %.1fx faster (target >= 10x)\n", py / load);
  return 0;
}
