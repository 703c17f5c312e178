// serve_set: the C++ half of the serving end-to-end test (serve_e2e.py), what a server does with a plan.
//
//   serve_set PLAN_DIR MODEL.pt CALLS.pt OUT_DIR [--fallback] [--replace PLAN_DIR2 --threads N]
//             [--replace-weights W --new-model M2.pt [--bad-weights B]] [--refuse-many N] [--runners N]
//
// Loads the plan's packages as an optrace::aoti::PackageSet (with the TorchScript module as its
// fallback with --fallback), serves the calls that serve_e2e.py saved (as observe_scripted reads
// them) through an InputObserver<PackageSet>, compares every output with the module's (replay's
// check-mode tolerance), and writes OUT_DIR/stats.json (PackageSet::stats) and
// OUT_DIR/served.json (the observer's file). With --replace: N threads serve the calls over and
// over while the main thread loads PLAN_DIR2 and replaces the set under them; every call must
// be answered, and once the replace has returned, the calls served after it are counted apart
// (OUT_DIR/after.json: the stats of a second pass, after the threads joined).
// With --replace-weights W --new-model M2.pt [--bad-weights B]: first B must be refused (one
// line, printed), then N threads serve the calls over and over while the main thread swaps in W,
// the plan's own weights, then W again, 0.5 s apart (PackageSet::replace_weights); every output
// must be the old module's or M2's, never a mix, and after the last swap every output M2's.
// --runners N: each package runs up to N calls at once (LoadOptions::runners).
// With --replace PLAN_DIR2 --slow-fallback: the fallback takes 3 s; one thread makes a call that
// falls back, and the main thread replaces the set while it runs, then once more after it has
// returned: the first replace must return after PackageSet::kRetireWait with the old set kept
// (stats' `retired` 1), the call's end must not free it (still 1: a request thread never does),
// the second replace must (0).
// Prints one line per check; exit status 0 when all hold, 1 otherwise.
#include <optrace/detail/replay/compare.hpp>
#include <optrace/observer.hpp>
#include <optrace/serve.hpp>

#include <torch/script.h>
#include <torch/serialize.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Call {
  std::vector<c10::IValue> args;
  torch::jit::Kwargs kwargs;
};

std::vector<Call> read_calls(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue saved = torch::pickle_load(bytes);
  std::vector<Call> calls;
  for (const c10::IValue& call : saved.toTupleRef().elements().at(0).toListRef()) {
    const auto& pieces = call.toTupleRef().elements();
    Call c;
    c.args.assign(pieces.at(0).toListRef().begin(), pieces.at(0).toListRef().end());
    for (const auto& entry : pieces.at(1).toGenericDict()) c.kwargs.emplace(entry.key().toStringRef(), entry.value());
    calls.push_back(std::move(c));
  }
  return calls;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text << "\n"; }

bool same_output(const c10::IValue& got, const c10::IValue& want, std::string* why = nullptr) {
  optrace::detail::Comparison cmp;
  cmp.exact_dtypes = true;
  optrace::detail::compare_values(got, want, "output", cmp);
  if (why) *why = cmp.message;
  return cmp.ok;
}

// --replace-weights: see the file's comment.
int replace_weights_under_load(optrace::aoti::PackageSet& set, torch::jit::Module& before, torch::jit::Module& after,
                               const std::vector<Call>& calls, int threads, const std::string& weights,
                               const std::string& plan_weights, const std::string& bad_weights) {
  std::vector<c10::IValue> want_before, want_after;
  for (const Call& c : calls) {
    want_before.push_back(before.forward(c.args, c.kwargs));
    want_after.push_back(after.forward(c.args, c.kwargs));
  }
  bool ok = true;
  if (!bad_weights.empty()) {
    try {
      set.replace_weights(bad_weights);
      std::cout << "weights of another shape were not refused\n";
      ok = false;
    } catch (const optrace::ArgumentError& e) {
      std::cout << "refused: " << e.what() << "\n";
    }
  }
  std::atomic<bool> done{false};
  std::atomic<int64_t> answered{0}, failures{0}, neither{0}, as_before{0}, as_after{0};
  std::vector<std::thread> servers;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int t = 0; t < threads; ++t)
    servers.emplace_back([&, t] {
      c10::InferenceMode thread_inference;
      while (!done.load() && std::chrono::steady_clock::now() < deadline)
        for (size_t k = 0; k < calls.size(); ++k) {
          const size_t i = (k + static_cast<size_t>(t)) % calls.size();
          try {
            const c10::IValue got = set.call(calls[i].args, calls[i].kwargs);
            answered.fetch_add(1);
            if (same_output(got, want_after[i])) as_after.fetch_add(1);
            else if (same_output(got, want_before[i])) as_before.fetch_add(1);
            else if (neither.fetch_add(1) == 0) std::cout << "an output of neither model, call " << i << "\n";
          } catch (const std::exception& e) {
            if (failures.fetch_add(1) == 0) std::cout << "a call failed: " << e.what() << "\n";
          }
        }
    });
  while (answered.load() < threads && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int swaps = 0;
  for (const std::string& w : {weights, plan_weights, weights}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    set.replace_weights(w);
    ++swaps;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  done.store(true);
  for (std::thread& s : servers) s.join();
  int64_t after_mismatch = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string why;
    if (!same_output(set.call(calls[i].args, calls[i].kwargs), want_after[i], &why)) {
      if (after_mismatch++ == 0) std::cout << "after the last swap, call " << i << ": " << why << "\n";
    }
  }
  std::cout << "swapped weights " << swaps << " times under " << threads << " threads: " << answered.load()
            << " calls answered (" << as_before.load() << " with the old weights, " << as_after.load()
            << " with the new), " << failures.load() << " failed, " << neither.load()
            << " of neither model; after: " << calls.size() - static_cast<size_t>(after_mismatch) << " of " << calls.size()
            << " calls equal the new model's\n";
  return ok && failures.load() == 0 && neither.load() == 0 && after_mismatch == 0 && as_before.load() > 0 &&
                 as_after.load() > 0 ? 0 : 1;
}

}  // namespace

// --slow-fallback: see the file's comment.
int retire_under_a_slow_call(optrace::aoti::PackageSet& set, torch::jit::Module& module, const std::vector<Call>& calls,
                             const std::string& replacement) {
  std::atomic<bool> in_fallback{false};
  set.fallback([&](std::vector<c10::IValue> args, const optrace::aoti::PackageSet::Kwargs& kwargs) {
    in_fallback.store(true);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return module.forward(std::move(args), kwargs);
  });
  std::string failure;
  std::thread caller([&] {
    c10::InferenceMode thread_inference;
    try {
      set.call(calls.at(0).args, calls.at(0).kwargs);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  while (!in_fallback.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto started = std::chrono::steady_clock::now();
  set.replace(optrace::aoti::PackageSet::load(replacement));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int64_t during = set.stats().retired;
  caller.join();
  const int64_t after_call = set.stats().retired;
  set.replace(optrace::aoti::PackageSet::load(replacement));
  const int64_t after_replace = set.stats().retired;
  std::cout << "retired: the replace returned after " << waited << " s with " << during << " set(s) kept while a call "
            << "ran on it; " << after_call << " after the call returned; " << after_replace << " after the next replace"
            << (failure.empty() ? "" : "; the call failed: " + failure) << "\n";
  return failure.empty() && waited >= 1.9 && during == 1 && after_call == 1 && after_replace == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: serve_set PLAN_DIR MODEL.pt CALLS.pt OUT_DIR [--fallback] [--replace PLAN_DIR2 --threads N]\n";
    return 2;
  }
  bool with_fallback = false, slow_fallback = false;
  std::string replacement, new_weights, new_model, bad_weights;
  int threads = 4, refuse_many = 0, runners = 1;
  for (int i = 5; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--fallback") with_fallback = true;
    else if (a == "--replace" && i + 1 < argc) replacement = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (a == "--refuse-many" && i + 1 < argc) refuse_many = std::stoi(argv[++i]);
    else if (a == "--replace-weights" && i + 1 < argc) new_weights = argv[++i];
    else if (a == "--new-model" && i + 1 < argc) new_model = argv[++i];
    else if (a == "--bad-weights" && i + 1 < argc) bad_weights = argv[++i];
    else if (a == "--runners" && i + 1 < argc) runners = std::stoi(argv[++i]);
    else if (a == "--slow-fallback") slow_fallback = true;
  }
  const std::string out = argv[4];
  try {
    torch::jit::Module module = torch::jit::load(argv[2]);
    module.eval();
    c10::InferenceMode inference;
    optrace::aoti::PackageSet set = optrace::aoti::PackageSet::load(argv[1], optrace::aoti::LoadOptions().runners(runners));
    if (with_fallback) set.fallback(module);
    const std::vector<Call> calls = read_calls(argv[3]);
    std::cout << "loaded " << set.size() << " packages; " << calls.size() << " calls\n";

    if (!new_weights.empty()) {
      torch::jit::Module next = torch::jit::load(new_model);
      next.eval();
      return replace_weights_under_load(set, module, next, calls, threads, new_weights, set.weights_path(), bad_weights);
    }

    if (slow_fallback) return retire_under_a_slow_call(set, module, calls, replacement);

    if (refuse_many > 0) {
      // Calls no package takes, each with a keyword of its own (caller data in every refusal's
      // message): the stats must stay a few rows, whatever the traffic sends.
      for (int i = 0; i < refuse_many; ++i) {
        std::unordered_map<std::string, c10::IValue> kwargs = calls[0].kwargs;
        kwargs.emplace("unknown_" + std::to_string(i), calls[0].args.empty() ? c10::IValue(1) : calls[0].args[0]);
        try {
          set.call(calls[0].args, kwargs);
        } catch (const optrace::ArgumentError&) {
        }
      }
      const optrace::aoti::ServeStats stats = set.stats();
      write(out + "/refused.json", stats.to_json());
      std::cout << "refused " << stats.refused << " calls with " << refuse_many << " distinct keywords: "
                << stats.refusals.size() << " refusal rows\n" << stats.to_string();
      return stats.refused == refuse_many && stats.refusals.size() <= set.size() ? 0 : 1;
    }

    if (replacement.empty()) {
      optrace::InputObserver<optrace::aoti::PackageSet> observer(set);
      int mismatches = 0;
      for (const Call& c : calls) {
        c10::IValue got = observer.call(c.args, c.kwargs);
        c10::IValue want = module.forward(c.args, c.kwargs);
        optrace::detail::Comparison cmp;
        cmp.exact_dtypes = true;
        optrace::detail::compare_values(got, want, "output", cmp);
        if (!cmp.ok) {
          ++mismatches;
          std::cout << "mismatch: " << cmp.message << "\n";
        }
      }
      observer.save(out + "/served.json");
      write(out + "/stats.json", set.stats().to_json());
      std::cout << set.stats().to_string() << mismatches << " mismatches\n";
      return mismatches == 0 ? 0 : 1;
    }

    // Replace under load: `threads` threads serve the calls in a loop until the replace is done
    // and each has made at least two more passes (or 120 s have passed); none may fail.
    std::atomic<bool> replaced{false};
    std::atomic<int64_t> failures{0}, answered{0}, answered_before{0};
    std::vector<std::thread> servers;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (int t = 0; t < threads; ++t)
      servers.emplace_back([&, t] {
        c10::InferenceMode thread_inference;
        int passes_after = 0;
        while (passes_after < 2 && std::chrono::steady_clock::now() < deadline) {
          const bool after = replaced.load();
          for (size_t k = 0; k < calls.size(); ++k) {
            const Call& c = calls[(k + static_cast<size_t>(t)) % calls.size()];
            try {
              set.call(c.args, c.kwargs);
              answered.fetch_add(1);
            } catch (const std::exception& e) {
              if (failures.fetch_add(1) == 0) std::cout << "a call failed: " << e.what() << "\n";
            }
          }
          passes_after += after;
        }
      });
    // Replace once every thread has answered a call (on a loaded machine the first calls can take
    // longer than the load: the fresh-clone CI of 40976ea saw the replace before any call returned).
    while (answered.load() < threads && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    optrace::aoti::PackageSet next = optrace::aoti::PackageSet::load(replacement);  // loads on this thread, not theirs
    answered_before = answered.load();
    set.replace(next);
    replaced.store(true);
    for (std::thread& s : servers) s.join();
    optrace::aoti::ServeStats during = set.stats();
    write(out + "/stats.json", during.to_json());
    // After the replace: the same calls again, none may fall back.
    const int64_t fallbacks_before = during.fallbacks;
    for (const Call& c : calls) set.call(c.args, c.kwargs);
    optrace::aoti::ServeStats after = set.stats();
    write(out + "/after.json", after.to_json());
    std::cout << "replaced under " << threads << " threads: " << answered.load() << " calls answered ("
              << answered_before.load() << " before the replace), " << failures.load()
              << " failed; fallbacks after the replace: " << after.fallbacks - fallbacks_before << "\n"
              << after.to_string();
    // The replace happened while the threads served: calls before it and after it.
    const bool concurrent = answered_before.load() > 0 && answered.load() > answered_before.load();
    if (!concurrent) std::cout << "the threads did not serve on both sides of the replace\n";
    return failures.load() == 0 && after.fallbacks == fallbacks_before && concurrent ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "serve_set: " << e.what() << "\n";
    return 1;
  }
}
