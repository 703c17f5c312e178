// optrace/detail/profiler/torchscript_stacks.hpp: with_stack's TorchScript call stack and module hierarchy of a range
#pragma once
// Made by libtorch's own functions (the text torch.profiler writes), kept once per distinct text
// in the thread's buffer: a loop's ranges share a few stacks.

#include <optrace/detail/profiler/window.hpp>

#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/profiler/util.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace optrace::detail::profiler {

// The TorchScript call stack and module hierarchy around the current range, as torch.profiler
// writes them ("Call stack": "file(line): function;..." innermost first; "Module Hierarchy":
// "TOP(Net)::forward.fc(Linear)::forward."): empty outside TorchScript.
struct Stacks {
  std::string call_stack, module_hierarchy;
};
inline Stacks torchscript_stacks() {
  namespace impl = torch::profiler::impl;
  // stacksToStr quotes the text for JSON (and makes '"' a '\''): the quotes are the writer's.
  auto unquoted = [](std::string s) { return s.size() >= 2 ? s.substr(1, s.size() - 2) : std::string(); };
  Stacks s;
  const std::vector<torch::jit::StackEntry> entries = torch::jit::currentCallstack();
  if (!entries.empty()) s.call_stack = unquoted(impl::stacksToStr(impl::callstackStr(impl::prepareCallstack(entries)), ";"));
  const std::vector<std::string> modules = torch::jit::currentModuleHierarchy();
  if (!modules.empty()) s.module_hierarchy = unquoted(impl::stacksToStr(modules, "."));
  return s;
}

inline int32_t intern_stack(ThreadBuffer& b, std::string text) {
  if (text.empty()) return -1;
  auto [it, fresh] = b.stack_index.try_emplace(std::move(text), static_cast<int32_t>(b.stacks.size()));
  if (fresh) b.stacks.push_back(it->first);
  return it->second;
}

}  // namespace optrace::detail::profiler
