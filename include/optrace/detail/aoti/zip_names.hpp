// detail/aoti/zip_names.hpp: the names of the files in a zip archive, read as AOTInductor's loader reads them
#pragma once
// AOTInductor's loader (and torch's PyTorchStreamReader, and so torch.export's Python loader)
// open a package with miniz (mz_zip_reader_read_central_dir, third_party/miniz-3.0.2 in torch
// 2.6; 2.1.0 in torch 1.13). A check in front of it must read the directory miniz reads, or it
// checks another archive than the one extracted: an archive with two directories, a benign one
// named by the classic end record and another named by the ZIP64 record, passes a reader that
// prefers one and is extracted from the other. So zip_names follows miniz's rules step by step:
//
// 1. the end record: the last signature 0x06054b50 with at least 22 bytes after it, searched from
//    the end in miniz's own 4 KiB steps and window (a comment of up to 64 KiB; miniz gives up on
//    an archive whose next step back would start before byte 0, and so does this);
// 2. the ZIP64 locator just before it, when the end record is at byte 76 or later: its record
//    must lie in the file and carry its signature (miniz silently ignores a locator to no record;
//    this refuses it), then miniz's limits (one disk, at most 2^32-1 entries and directory bytes);
// 3. the ZIP64 record's values replace the classic ones wherever it is present, as in miniz:
//    this refuses an archive where a classic field that is not saturated (0xFFFF, 0xFFFFFFFF)
//    disagrees with the ZIP64 one, since such an archive means two things to two readers;
// 4. miniz's checks of the directory: entries on this disk equal to all entries, disk numbers 0
//    (or both 1), at least 46 bytes an entry, the directory inside the file (no overflow: both
//    bounds are checked apart), then each entry's signature and lengths inside the directory;
//    and, past miniz, a directory exactly filled by its entries (nothing hidden after them).
//
// It reads the tail and the directory only, never the (possibly large) contents, and allocates at
// most the directory's size, which the file must hold. Everything it throws is optrace::Error
// (IoError for a file it cannot open or read), never a standard exception.

#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace optrace::detail::aoti {

namespace zip {

inline uint64_t le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

inline constexpr uint32_t kEndSig = 0x06054b50, kLocatorSig = 0x07064b50, kZip64Sig = 0x06064b50, kEntrySig = 0x02014b50;
inline constexpr uint64_t kEndSize = 22, kLocatorSize = 20, kZip64Size = 56, kEntrySize = 46;
inline constexpr uint64_t kSearchStep = 4096, kMaxComment = 0xFFFF;

// miniz's mz_zip_reader_locate_header_sig: blocks of 4 KiB from the end, each 3 bytes into the
// next, until one holds the signature with room for the record after it, or the block starts at
// byte 0, or 64 KiB + 22 bytes from the end. A step back from a block that starts before byte
// 4093 goes below 0 in miniz (signed minus unsigned), whose read then fails: no record.
template <class ReadAt>
std::optional<uint64_t> find_end_record(uint64_t size, ReadAt& read_at) {
  std::string block(kSearchStep, '\0');
  uint64_t at = size > kSearchStep ? size - kSearchStep : 0;
  for (;;) {
    const uint64_t n = std::min(kSearchStep, size - at);
    read_at(at, block.data(), n);
    for (uint64_t i = n - 4 + 1; i-- > 0;)
      if (le(block.data() + i, 4) == kEndSig && size - (at + i) >= kEndSize) return at + i;
    if (at == 0 || size - at >= kMaxComment + kEndSize) return std::nullopt;
    if (at < kSearchStep - 3) return std::nullopt;
    at -= kSearchStep - 3;
  }
}

// The end of the central directory, as miniz takes it (the ZIP64 record's values where one is).
struct Directory {
  uint64_t entries = 0, size = 0, offset = 0;
};

template <class ReadAt>
Directory read_end_records(uint64_t size, ReadAt& read_at) {
  const std::optional<uint64_t> end_at = find_end_record(size, read_at);
  if (!end_at) raise<Error>("not a zip archive (no end of central directory)");
  char end[kEndSize];
  read_at(*end_at, end, kEndSize);
  uint64_t entries = le(end + 10, 2), on_disk = le(end + 8, 2), disk = le(end + 4, 2), dir_disk = le(end + 6, 2);
  Directory d{entries, le(end + 12, 4), le(end + 16, 4)};
  char locator[kLocatorSize];
  if (*end_at >= kLocatorSize + kZip64Size) read_at(*end_at - kLocatorSize, locator, kLocatorSize);
  if (*end_at >= kLocatorSize + kZip64Size && le(locator, 4) == kLocatorSig) {
    const uint64_t record_at = le(locator + 8, 8);
    if (record_at > size - kZip64Size) raise<Error>("a ZIP64 locator to a record past the end of the file");
    char r[kZip64Size];
    read_at(record_at, r, kZip64Size);
    if (le(r, 4) != kZip64Sig) raise<Error>("a ZIP64 locator to no ZIP64 record");
    if (le(r + 4, 8) < kZip64Size - 12) raise<Error>("a damaged ZIP64 end record (its size field)");
    if (le(locator + 16, 4) != 1) raise<Error>("a zip archive on several disks");
    const uint64_t entries64 = le(r + 32, 8), on_disk64 = le(r + 24, 8), size64 = le(r + 40, 8);
    if (entries64 > 0xFFFFFFFF || on_disk64 > 0xFFFFFFFF) raise<Error>("a zip archive of more than 2^32-1 entries");
    if (size64 > 0xFFFFFFFF) raise<Error>("a zip directory of more than 2^32-1 bytes");
    const Directory z64{entries64, size64, le(r + 48, 8)};
    const uint64_t disk64 = le(r + 16, 4), dir_disk64 = le(r + 20, 4);
    auto agree = [](uint64_t classic, uint64_t saturated, uint64_t zip64) { return classic == saturated || classic == zip64; };
    if (!agree(d.entries, 0xFFFF, z64.entries) || !agree(on_disk, 0xFFFF, on_disk64) || !agree(d.size, 0xFFFFFFFF, z64.size) ||
        !agree(d.offset, 0xFFFFFFFF, z64.offset) || !agree(disk, 0xFFFF, disk64) || !agree(dir_disk, 0xFFFF, dir_disk64))
      raise<Error>("its classic and ZIP64 end records disagree (", d.entries, " entries, ", d.size, " directory bytes at ",
                   d.offset, " against ", z64.entries, ", ", z64.size, " at ", z64.offset,
                   "): readers would see different archives");
    d = z64;
    on_disk = on_disk64;
    disk = disk64;
    dir_disk = dir_disk64;
  }
  if (d.entries != on_disk)
    raise<Error>("a damaged or multi-disk zip archive (", d.entries, " entries, ", on_disk, " of them on this disk)");
  if ((disk | dir_disk) != 0 && (disk != 1 || dir_disk != 1)) raise<Error>("a zip archive on several disks");
  if (d.size < d.entries * kEntrySize)
    raise<Error>("a damaged zip directory (", d.entries, " entries in ", d.size, " bytes)");
  if (d.offset > size || d.size > size - d.offset) raise<Error>("a zip directory beyond the end of the file");
  return d;
}

}  // namespace zip

/// One file of a zip archive, as its central directory entry describes it (sizes and offset from
/// its ZIP64 extra field where the classic ones are saturated, as miniz takes them).
struct ZipEntry {
  std::string name;
  uint64_t method = 0, flags = 0, crc32 = 0, compressed = 0, size = 0, local_offset = 0;
};

/// The entries of the zip archive of `size` bytes that `read_at(offset, into, n)` reads (it must
/// read exactly n bytes or throw), in the directory's order, as miniz reads them. Throws
/// optrace::Error naming what is wrong.
template <class ReadAt>
std::vector<ZipEntry> zip_entries_with(uint64_t size, ReadAt&& read_at) {
  if (size < zip::kEndSize) raise<Error>("not a zip archive (", size, " bytes)");
  const zip::Directory d = zip::read_end_records(size, read_at);
  std::string dir;
  std::vector<ZipEntry> entries;
  try {
    dir.resize(d.size);
    entries.reserve(d.entries);
  } catch (const std::bad_alloc&) {
    raise<Error>("its zip directory of ", d.size, " bytes does not fit in memory");
  }
  if (d.entries == 0 && d.size == 0) return entries;
  read_at(d.offset, dir.data(), d.size);
  uint64_t at = 0;
  for (uint64_t k = 0; k < d.entries; ++k) {
    const uint64_t left = dir.size() - at;
    const char* e = dir.data() + at;
    if (left < zip::kEntrySize || zip::le(e, 4) != zip::kEntrySig)
      raise<Error>("a damaged zip directory (entry ", k, " of ", d.entries, ")");
    const uint64_t name = zip::le(e + 28, 2), extra = zip::le(e + 30, 2), comment = zip::le(e + 32, 2);
    if (zip::kEntrySize + name + extra + comment > left)
      raise<Error>("a damaged zip directory (entry ", k, " of ", d.entries, " runs past its end)");
    ZipEntry z;
    z.name.assign(e + zip::kEntrySize, name);
    z.flags = zip::le(e + 8, 2);
    z.method = zip::le(e + 10, 2);
    z.crc32 = zip::le(e + 16, 4);
    z.compressed = zip::le(e + 20, 4);
    z.size = zip::le(e + 24, 4);
    z.local_offset = zip::le(e + 42, 4);
    // The ZIP64 extended information (id 1): the saturated fields, in this order, 8 bytes each.
    const char* x = e + zip::kEntrySize + name;
    for (uint64_t xat = 0; xat + 4 <= extra;) {
      const uint64_t id = zip::le(x + xat, 2), len = zip::le(x + xat + 2, 2);
      if (xat + 4 + len > extra) break;
      if (id == 1) {
        uint64_t* fields[] = {&z.size, &z.compressed, &z.local_offset};
        uint64_t f = 0;
        for (uint64_t* field : fields) {
          if (*field != 0xFFFFFFFF) continue;
          if (f + 8 > len) raise<Error>("a damaged zip directory (entry ", k, "'s ZIP64 field is short)");
          *field = zip::le(x + xat + 4 + f, 8);
          f += 8;
        }
      }
      xat += 4 + len;
    }
    entries.push_back(std::move(z));
    at += zip::kEntrySize + name + extra + comment;
  }
  if (at != dir.size())
    raise<Error>("a zip directory not filled by its ", d.entries, " entries (", dir.size() - at, " bytes after them)");
  return entries;
}

/// The entry names of zip_entries_with, in the directory's order.
template <class ReadAt>
std::vector<std::string> zip_names_with(uint64_t size, ReadAt&& read_at) {
  std::vector<std::string> names;
  for (ZipEntry& e : zip_entries_with(size, read_at)) names.push_back(std::move(e.name));
  return names;
}

/// zip_names_with on bytes in memory (the fuzzer's and the tests' way in).
inline std::vector<std::string> zip_names_in(std::string_view bytes) {
  return zip_names_with(bytes.size(), [&](uint64_t offset, char* into, uint64_t n) {
    if (offset > bytes.size() || n > bytes.size() - offset) raise<Error>("the file ends inside its zip directory");
    std::memcpy(into, bytes.data() + offset, n);
  });
}

/// Reads exactly `n` bytes at `offset` of the file open at `fd` (pread: the descriptor's offset is
/// left alone); `path` names it in errors, `where` says what ended early.
inline void read_exactly_at(int fd, uint64_t offset, char* into, uint64_t n, const std::string& path,
                            const char* where = "its zip directory") {
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, into + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) raise<IoError>("cannot read '", path, "': ", std::strerror(errno));
    if (r == 0) raise<Error>("the file ends inside ", where);
    got += static_cast<uint64_t>(r);
  }
}

/// The entries of the zip archive of `size` bytes open at `fd`; `path` names it in errors.
inline std::vector<ZipEntry> zip_entries_of(int fd, uint64_t size, const std::string& path) {
  return zip_entries_with(size, [&](uint64_t offset, char* into, uint64_t n) { read_exactly_at(fd, offset, into, n, path); });
}

/// The entry names of the zip archive of `size` bytes open at `fd`; `path` names it in errors.
inline std::vector<std::string> zip_names_of(int fd, uint64_t size, const std::string& path) {
  return zip_names_with(size, [&](uint64_t offset, char* into, uint64_t n) { read_exactly_at(fd, offset, into, n, path); });
}

/// The entry names of the zip archive at `path`. Throws IoError when it cannot be opened or read
/// (a directory, a FIFO), Error for what is wrong in it (not naming the file: the caller does).
inline std::vector<std::string> zip_names(const std::string& path) {
  size_t size = 0;
  const Fd fd(open_regular_file(path, &size));
  return zip_names_of(fd.get(), size, path);
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
