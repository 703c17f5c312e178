// detail/aoti/zip_names.hpp: the names of the files in a zip archive, from its central directory
#pragma once
// Enough of the zip format (APPNOTE.TXT 4.3.12-4.3.16, ZIP64 included) to tell whether a file is
// an AOTInductor package before AOTInductor's loader extracts it: the end-of-central-directory
// record at the end of the file, then the central directory's file headers. Reads the tail and
// the directory only, never the (possibly large) contents. Throws optrace::Error naming what is
// wrong.

#include <optrace/error.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace optrace::detail::aoti {

namespace zip {

inline uint64_t le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

inline std::string read_at(std::ifstream& in, uint64_t offset, uint64_t size) {
  std::string out(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(out.data(), static_cast<std::streamsize>(size))) raise<Error>("the file ends inside its zip directory");
  return out;
}

}  // namespace zip

inline std::vector<std::string> zip_names(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) raise<IoError>("cannot open '", path, "'");
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  constexpr uint64_t kEocd = 22, kMaxComment = 65535;
  if (size < kEocd) raise<Error>("not a zip archive (", size, " bytes)");
  const uint64_t tail_size = std::min<uint64_t>(size, kEocd + kMaxComment + 20);
  const std::string tail = zip::read_at(in, size - tail_size, tail_size);
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - kEocd + 1; i-- > 0;)
    if (zip::le(tail.data() + i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) raise<Error>("not a zip archive (no end of central directory)");
  uint64_t count = zip::le(tail.data() + eocd + 10, 2);
  uint64_t dir_size = zip::le(tail.data() + eocd + 12, 4);
  uint64_t dir_offset = zip::le(tail.data() + eocd + 16, 4);
  if (count == 0xFFFF || dir_size == 0xFFFFFFFF || dir_offset == 0xFFFFFFFF) {  // ZIP64
    if (eocd < 20 || zip::le(tail.data() + eocd - 20, 4) != 0x07064b50) raise<Error>("a ZIP64 archive without its locator");
    const uint64_t record = zip::le(tail.data() + eocd - 20 + 8, 8);
    if (record + 56 > size) raise<Error>("a ZIP64 record beyond the end of the file");
    const std::string r = zip::read_at(in, record, 56);
    if (zip::le(r.data(), 4) != 0x06064b50) raise<Error>("a ZIP64 locator to no ZIP64 record");
    count = zip::le(r.data() + 32, 8);
    dir_size = zip::le(r.data() + 40, 8);
    dir_offset = zip::le(r.data() + 48, 8);
  }
  if (dir_offset + dir_size > size) raise<Error>("a zip directory beyond the end of the file");
  const std::string dir = zip::read_at(in, dir_offset, dir_size);
  std::vector<std::string> names;
  size_t at = 0;
  for (uint64_t k = 0; k < count; ++k) {
    if (at + 46 > dir.size() || zip::le(dir.data() + at, 4) != 0x02014b50) raise<Error>("a damaged zip directory");
    const size_t name_len = zip::le(dir.data() + at + 28, 2), extra = zip::le(dir.data() + at + 30, 2),
                 comment = zip::le(dir.data() + at + 32, 2);
    if (at + 46 + name_len > dir.size()) raise<Error>("a damaged zip directory");
    names.emplace_back(dir.data() + at + 46, name_len);
    at += 46 + name_len + extra + comment;
  }
  return names;
}

// The folder a package's files are under, as AOTInductor's loader finds it: torch 2.7 and newer
// write every file under one top folder named after the archive ("model/data/aotinductor/..."),
// torch 2.6 at the root ("data/aotinductor/..."). The loader (model_package_loader.cpp) takes the
// first component of the first two names as that folder when they agree. Returns it with its
// '/' ("model/"), or "" for the layout at the root.
inline std::string archive_prefix(const std::vector<std::string>& names) {
  if (names.size() < 2) return "";
  const std::string first = names[0].substr(0, names[0].find('/')), second = names[1].substr(0, names[1].find('/'));
  return !first.empty() && first == second ? first + "/" : "";
}

/// The first entry name that would land outside the folder it is extracted into, or none. torch
/// 2.6's AOTIModelPackageLoader (model_package_loader.cpp, its extraction loop) joins each name
/// under data/aotinductor/<model>/ to its temporary folder unchecked, so such a name writes where
/// the archive says (zip slip). Refused: an absolute name ('/x', '\x', a drive 'C:x'), a '..'
/// component (separators '/' and '\': 'a/../b', '../x', 'x/..'; not 'a..b' or '..foo'), a NUL.
/// Reads the names only, once each.
inline std::optional<std::string> unsafe_entry_name(const std::vector<std::string>& names) {
  auto unsafe = [](const std::string& n) {
    if (!n.empty() && (n[0] == '/' || n[0] == '\\')) return true;
    if (n.size() >= 2 && n[1] == ':' && ((n[0] >= 'A' && n[0] <= 'Z') || (n[0] >= 'a' && n[0] <= 'z'))) return true;
    if (n.find('\0') != std::string::npos) return true;
    for (size_t begin = 0; begin <= n.size();) {
      const size_t end = std::min(n.find_first_of("/\\", begin), n.size());
      if (n.compare(begin, end - begin, "..") == 0) return true;
      begin = end + 1;
    }
    return false;
  };
  for (const std::string& n : names)
    if (unsafe(n)) return n;
  return std::nullopt;
}

}  // namespace optrace::detail::aoti
