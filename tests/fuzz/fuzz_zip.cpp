// tests/fuzz/fuzz_zip.cpp: the archive check in front of AOTInductor's loader
// (detail/aoti/zip_names.hpp) on arbitrary bytes, against the reader it guards: libtorch's own
// miniz. Whatever miniz reads, the check refuses (an optrace error) or reads the same names in
// the same order; it never throws anything else. Seeds: tests/export/crafted_zips.py.
#include "harness.hpp"

#include <optrace/detail/aoti/zip_names.hpp>

#include "miniz_names.hpp"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = optrace_fuzz::text_of(data, size);
  std::vector<std::string> ours;
  bool read = false;
  optrace_fuzz::expect_only_optrace_errors("zip_names", [&] {
    ours = optrace::detail::aoti::zip_names_in(bytes);
    read = true;
  });
  if (!read) return 0;
  const std::optional<std::vector<std::string>> miniz = optrace_test::miniz_names(bytes);
  if (miniz && *miniz != ours) optrace_fuzz::property_failed("the check read other names than miniz");
  return 0;
}
