// tests/test_kineto.cpp: Kineto trace import and export (optrace/kineto.hpp)
#include <optrace/kineto.hpp>

#include "optrace_catch.hpp"

#include <iostream>

TEST_CASE("kineto: dump real traces", "[kineto][dump]") {
  for (const char* name : {"rocm_minitoy_train.pt.trace.json.gz", "small_base.pt.trace.json.gz", "mtia_inference.pt.trace.json.gz"}) {
    auto r = optrace::kineto::load(optrace_test::data_path(std::string("kineto/") + name));
    std::cout << "== " << name << "\n" << r.report.to_string() << r.trace.to_json(0).substr(0, 3000) << "\n";
  }
}
