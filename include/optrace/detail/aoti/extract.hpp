// detail/aoti/extract.hpp: a package's model files extracted from the archive optrace checked
#pragma once
// torch 2.6's AOTIModelPackageLoader extracts a package and builds a runner of one model; it has
// no way to ask for more (its `num_runners` came in 2.8), nor to say where the compiled library
// is. So optrace does what the loader does (model_package_loader.cpp): it extracts the files under
// data/aotinductor/<model>/ into a fresh private folder, reads AOTInductor's metadata from the
// `<name>_metadata.json` beside the `.cpp`, and builds the runner registered for the package's
// device (getAOTIModelRunnerRegistry, as the loader does) with as many models as the caller asks.
//
// The archive is read through the descriptor whose directory zip_names.hpp checked, so what is
// extracted is what was checked. Each entry's local header must agree with the directory, the
// data must lie in the file, a stored entry's sizes agree, a deflated one inflates to exactly its
// size, and every file's CRC-32 matches (miniz checks the same when it extracts). Names are
// confined to the folder (beneath.hpp): a file never lands outside it, and nothing is written
// through a link.

#include <optrace/detail/aoti/zip_names.hpp>
#include <optrace/detail/common/beneath.hpp>
#include <optrace/detail/common/io.hpp>
#include <optrace/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

namespace optrace::detail::aoti {

/// A private folder made for one package (mkdtemp, mode 0700, under $TMPDIR or /tmp), removed
/// with everything in it when its owner goes.
class ExtractionFolder {
 public:
  ExtractionFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/optrace-pt2-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      raise<IoError>("cannot make a folder to extract the package into ('", pattern, "'): ", std::strerror(errno));
    path_ = pattern;
  }
  ExtractionFolder(const ExtractionFolder&) = delete;
  ExtractionFolder& operator=(const ExtractionFolder&) = delete;
  ~ExtractionFolder() { remove_tree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

namespace zip {
inline constexpr uint32_t kLocalSig = 0x04034b50;
inline constexpr uint64_t kLocalSize = 30;
}  // namespace zip

/// Writes entry `e` of the archive open at `fd` (`size` bytes; `path` names it) to `out`: its data
/// where its local header says, stored (method 0) or deflated (8), checked against the
/// directory's sizes and CRC-32. Throws Error naming the entry for anything else.
inline void extract_entry(int fd, uint64_t size, const ZipEntry& e, int out, const std::string& path) {
  constexpr uint64_t kChunk = 64 * 1024;  // read and inflated at a time
  auto bad = [&](auto&&... what) { raise<Error>("entry '", e.name, "': ", what...); };
  if (e.flags & 1) bad("encrypted");
  if (e.method != 0 && e.method != 8) bad("compressed with method ", e.method, ", which optrace does not extract");
  if (e.local_offset > size || zip::kLocalSize > size - e.local_offset) bad("its local header lies past the end of the file");
  char local[zip::kLocalSize];
  read_exactly_at(fd, e.local_offset, local, zip::kLocalSize, path, "an entry's header");
  if (zip::le(local, 4) != zip::kLocalSig) bad("no local header where the directory says");
  const uint64_t data_at = e.local_offset + zip::kLocalSize + zip::le(local + 26, 2) + zip::le(local + 28, 2);
  if (data_at > size || e.compressed > size - data_at) bad("its data lies past the end of the file");
  if (e.method == 0 && e.compressed != e.size) bad("stored, yet ", e.compressed, " bytes in the archive for ", e.size);
  // Deflate gives at most 1,032 bytes a byte: a larger size is a lie that would fill the disk.
  if (e.method == 8 && e.size / 1032 > e.compressed) bad("declares ", e.size, " bytes from ", e.compressed, ", more than deflate gives");

  std::string in(std::min<uint64_t>(e.compressed, kChunk), '\0'), inflated(e.method == 8 ? kChunk : 0, '\0');
  uLong crc = ::crc32(0, nullptr, 0);
  uint64_t written = 0;
  auto write_out = [&](const char* p, uint64_t n) {
    if (n > e.size - written) bad("inflates to more than its ", e.size, " bytes");
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n));
    written += n;
    if (const int err = write_all(out, p, n)) raise<IoError>("cannot write the extracted '", e.name, "': ", std::strerror(err));
  };
  z_stream z{};
  if (e.method == 8 && inflateInit2(&z, -15) != Z_OK) bad("zlib cannot start inflating");
  struct End {
    z_stream* z;
    bool on;
    ~End() { if (on) inflateEnd(z); }
  } end{&z, e.method == 8};
  int status = Z_OK;
  for (uint64_t done = 0; done < e.compressed;) {
    const uint64_t n = std::min<uint64_t>(in.size(), e.compressed - done);
    read_exactly_at(fd, data_at + done, in.data(), n, path, "an entry's data");
    done += n;
    if (e.method == 0) {
      write_out(in.data(), n);
      continue;
    }
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(n);
    while (z.avail_in > 0 && status != Z_STREAM_END) {
      z.next_out = reinterpret_cast<Bytef*>(inflated.data());
      z.avail_out = static_cast<uInt>(inflated.size());
      status = inflate(&z, Z_NO_FLUSH);
      if (status != Z_OK && status != Z_STREAM_END) bad("damaged compressed data");
      write_out(inflated.data(), inflated.size() - z.avail_out);
    }
  }
  if (e.method == 8 && status != Z_STREAM_END) {  // the last output may still be in zlib
    z.next_in = nullptr;
    z.avail_in = 0;
    z.next_out = reinterpret_cast<Bytef*>(inflated.data());
    z.avail_out = static_cast<uInt>(inflated.size());
    status = inflate(&z, Z_FINISH);
    if (status != Z_STREAM_END) bad("its compressed data ends early");
    write_out(inflated.data(), inflated.size() - z.avail_out);
  }
  if (written != e.size) bad(written, " bytes where the directory says ", e.size);
  if (crc != e.crc32) bad("its CRC-32 does not match: the archive is damaged");
}

/// Where extract_model wrote the compiled library and AOTInductor's metadata file (empty when
/// the package has none).
struct ExtractedModel {
  std::string library, metadata;
};

/// Extracts every file under `prefix` (the model's folder, "data/aotinductor/<model>/") from the
/// archive open at `fd` into `folder`, keeping their paths below the prefix, and says where the
/// library and its metadata are. The names were checked safe (unsafe_entry_name) and are walked
/// again here (open_folder_beneath). Throws Error for a damaged entry, IoError for a write.
inline ExtractedModel extract_model(int fd, uint64_t size, const std::vector<ZipEntry>& entries, const std::string& prefix,
                                    const ExtractionFolder& folder, const std::string& path) {
  ExtractedModel got;
  std::string cpp;
  for (const ZipEntry& e : entries) {
    if (e.name.size() <= prefix.size() || e.name.compare(0, prefix.size(), prefix) != 0 || e.name.back() == '/') continue;
    const std::string rel = e.name.substr(prefix.size());
    auto [dir, leaf] = open_folder_beneath(folder.path(), rel, MissingFolder::Make);
    Fd out(::openat(dir.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700));
    if (!out) raise<IoError>("cannot extract '", e.name, "' into '", folder.path(), "': ", std::strerror(errno));
    extract_entry(fd, size, e, out.get(), path);
    const std::string at = folder.path() + "/" + rel;
    auto ends = [&](const char* s) { return rel.size() > std::strlen(s) && rel.compare(rel.size() - std::strlen(s), std::string::npos, s) == 0; };
    if (ends(".so")) {
      if (!got.library.empty()) raise<Error>("two compiled models under ", prefix, ": '", got.library.substr(folder.path().size() + 1), "' and '", rel, "'");
      got.library = at;
    } else if (ends(".cpp")) {
      cpp = at;
    }
  }
  // The loader reads the metadata of the model whose .cpp it found: <stem>_metadata.json.
  if (!cpp.empty()) {
    const std::string metadata = cpp.substr(0, cpp.size() - 4) + "_metadata.json";
    if (::access(metadata.c_str(), F_OK) == 0) got.metadata = metadata;
  }
  return got;
}

}  // namespace optrace::detail::aoti
