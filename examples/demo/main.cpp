// examples/demo: observe a small transformer's real calls, infer what torch.export needs; trace
// the aten ops it runs and replay them on the best device there is.
//
//   demo [OUTPUT_DIR]   (default: the current directory)
#include <optrace/detail/common/compat.hpp>
#include <optrace/materialize.hpp>
#include <optrace/observations.hpp>
#include <optrace/observer.hpp>
#include <optrace/op_tracer.hpp>
#include <optrace/replay.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "model.hpp"

namespace {

// What to try next, with commands that run here: the export needs torch >= 2.6 (Debian trixie),
// so on an older torch it names the chroot CI runs it in.
void print_next_steps(const std::string& cli, const std::string& trace_path, const std::string& obs_path) {
  std::cout << "\nnext:\n"
            << "  the command line (summary, convert, replay, verify, ...): " << cli << " summary " << trace_path << "\n";
  const std::string export_command = "python3 examples/python/export_from_observations.py " + obs_path;
  if (OPTRACE_TORCH_VERSION >= 20600) {
    std::cout << "  export the model from the observations: " << export_command << "\n";
  } else {
    std::cout << "  export the model from the observations needs torch >= 2.6 (this is libtorch " << TORCH_VERSION
              << "); in a Debian trixie chroot (its first run makes it): bash .ci/trixie.sh --run '" << export_command << "'\n";
  }
}

int run(const std::string& out_dir, const std::string& cli) {
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  demo::TinyTransformer model;
  model->eval();

  // 1. Observe: wrap the model; calls go through unchanged and are recorded.
  optrace::InputObserver<demo::TinyTransformer> observer(
      model, optrace::ObserverOptions().arg_names({"input_ids", "attention_mask"}).store_n_calls(3));

  struct Request { int64_t batch, seq; bool masked; };
  const Request traffic[] = {{2, 16, false}, {4, 24, true}, {3, 9, true}, {8, 32, true}, {1, 7, false}, {5, 12, true}};
  for (const Request& r : traffic) {
    auto ids = torch::randint(0, 100, {r.batch, r.seq}, torch::kLong);
    c10::optional<torch::Tensor> mask;
    if (r.masked) mask = torch::ones({r.batch, r.seq}, torch::kLong);
    auto logits = observer(ids, mask);
    std::cout << "call: input_ids " << ids.sizes() << (r.masked ? " with mask" : " no mask") << " -> logits "
              << logits.sizes() << "\n";
  }
  std::cout << "\ncalls recorded: " << observer.num_calls() << ", stored: " << observer.num_obs() << "\n";

  // 2. Analyse: which dims vary, and one representative set of export arguments.
  optrace::DynamicShapes shapes = observer.infer_dynamic_shapes();
  std::cout << "\ndynamic_shapes = " << shapes.to_python() << "\n";
  for (const auto& warning : shapes.warnings()) std::cout << "warning: " << warning << "\n";
  // The named style: observed ranges, and torch.export fails rather than specialize. input_ids
  // and attention_mask always agree on batch and sequence: one symbol each.
  std::cout << "named: "
            << observer.infer_dynamic_shapes(optrace::DynamicShapesOptions().dim_style(optrace::DimStyle::named)).to_python()
            << "\n";
  optrace::Arguments args = observer.infer_arguments();
  std::cout << "export arguments: " << args.describe() << "\n";

  // 3. Write torch's DynamicShapesSpec, and the observation file (no user data in either).
  const std::string spec_path = out_dir + "/dynamic_shapes.json";
  shapes.save(spec_path);
  const std::string obs_path = out_dir + "/observations.json";
  observer.save(obs_path);
  std::cout << "wrote " << spec_path << " and " << obs_path << "\n";

  // 4. Elsewhere: reload the file and rebuild export arguments on the best device there is.
  const c10::Device device = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  optrace::Observations loaded = optrace::load_observations(obs_path);
  optrace::Arguments rebuilt = loaded.materialize(optrace::MaterializeOptions().device(device).int_range(0, 100));
  std::cout << "materialized on " << device << ": " << rebuilt.describe() << "\n";
  auto logits = model->forward(rebuilt.args[0].toTensor().cpu(), rebuilt.args[1].toTensor().cpu());
  std::cout << "the model runs on them: logits " << logits.sizes() << "\n";

  // 5. Trace the aten ops the same traffic runs (extended: with the token ids' value range), and
  //    replay every unique input on the best device, checked against the CPU in float64.
  std::vector<std::pair<torch::Tensor, c10::optional<torch::Tensor>>> requests;
  for (const Request& r : traffic) {
    c10::optional<torch::Tensor> mask;
    if (r.masked) mask = torch::ones({r.batch, r.seq}, torch::kLong);
    requests.emplace_back(torch::randint(0, 100, {r.batch, r.seq}, torch::kLong), mask);
  }
  optrace::OpTracer tracer(optrace::OpTracerOptions().extended(true));
  tracer.start();
  for (const auto& [ids, mask] : requests) model->forward(ids, mask);
  tracer.stop();
  const optrace::OpTrace trace = tracer.trace();
  const std::string trace_path = out_dir + "/hf_op_trace.json";
  trace.save(trace_path);
  std::cout << "\nwrote " << trace_path << ": " << trace.size() << " ops, " << trace.unique_input_count()
            << " unique inputs, " << trace.total_calls() << " calls; replayed on " << device << ", by op:\n";
  const optrace::ReplayReport report =
      optrace::replay(trace, optrace::ReplayOptions().device(device).mode(optrace::ReplayMode::check));
  report.print_op_totals(std::cout);  // by input: optrace replay hf_op_trace.json --check
  report.print_not_ok(std::cout);
  std::cout << report.summary() << "\n";
  print_next_steps(cli, trace_path, obs_path);
  return report.all_ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  // The optrace command line is built beside the demo (examples/; cmake/dev.sh demo builds both).
  const std::string cli = (std::filesystem::path(argv[0]).parent_path() / "optrace").string();
  try {
    std::filesystem::create_directories(out_dir);
    return run(out_dir, cli);
  } catch (const std::exception& e) {  // optrace::Error, c10::Error, filesystem errors
    std::cerr << "demo: " << e.what() << "\n";
    return 2;
  }
}
