// tests/miniz_names.hpp: the names miniz reads in a zip archive, from the miniz inside libtorch.
#pragma once
// AOTInductor's loader and torch's PyTorchStreamReader read archives with miniz, which libtorch
// builds in and exports (mz_zip_*; torch 1.13 has miniz 2.x, torch 2.6 miniz 3.0.2). Calling it
// lets the tests and fuzz_zip hold optrace's archive check (detail/aoti/zip_names.hpp) to the
// real reader: whatever miniz reads, the check refuses or reads the same names. The archive
// state is kept in a zeroed buffer larger than miniz's mz_zip_archive (112 bytes on x86-64),
// zeroed as miniz asks of a caller, so no miniz header is needed.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

extern "C" {
int mz_zip_reader_init_mem(void* zip, const void* mem, size_t size, unsigned flags);
unsigned mz_zip_reader_get_num_files(void* zip);
unsigned mz_zip_reader_get_filename(void* zip, unsigned index, char* name, unsigned size);
int mz_zip_reader_end(void* zip);
}

namespace optrace_test {

/// miniz's names of the archive in `bytes`, in directory order, or none when miniz refuses it.
inline std::optional<std::vector<std::string>> miniz_names(std::string_view bytes) {
  alignas(16) unsigned char archive[1024] = {};
  if (!mz_zip_reader_init_mem(archive, bytes.data(), bytes.size(), 0)) return std::nullopt;
  std::vector<std::string> names;
  std::string name(1 << 16, '\0');
  for (unsigned i = 0, n = mz_zip_reader_get_num_files(archive); i < n; ++i) {
    const unsigned got = mz_zip_reader_get_filename(archive, i, name.data(), static_cast<unsigned>(name.size()));
    names.emplace_back(name.data(), got > 0 ? got - 1 : 0);
  }
  mz_zip_reader_end(archive);
  return names;
}

}  // namespace optrace_test
