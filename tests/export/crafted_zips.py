#!/usr/bin/env python3
"""Zip archives that read as two different archives to two readers, or that overflow a careless
reader's bounds: what optrace's archive check (include/optrace/detail/aoti/zip_names.hpp) must
refuse before AOTInductor's loader extracts them.

  two_directories(base, name, data)  base's files, and a second central directory that also
      holds `name`: the classic end record names the first directory, the ZIP64 record the
      second. miniz (AOTInductor's loader, torch's PyTorchStreamReader) and Python's zipfile
      read the second; a reader that trusts the classic record while its fields are not
      saturated reads the first.
  wrapping_directory()  98 bytes: a ZIP64 record naming a directory of 64 GiB whose offset +
      size wrap past 2^64 to 0 (a check `offset + size > file size` passes, and the reader asks
      for 64 GiB).

Run as a program, it writes fuzz_zip's seeds (the two crafted archives, and ordinary packages:
stored, commented and deflated) and its regressions (the two
crafted ones), which test_aoti and test_reliability also read:
  python3 tests/export/crafted_zips.py tests/fuzz/corpus/zip tests/fuzz/regressions/zip
"""
import io
import os
import struct
import sys
import zipfile


def _local(name, data):
    n = name.encode()
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, zipfile.crc32(data), len(data), len(data),
                       len(n), 0) + n + data


def _central(name, data, offset):
    n = name.encode()
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, zipfile.crc32(data), len(data),
                       len(data), len(n), 0, 0, 0, 0, 0, offset) + n


def _ends(count, size, offset, count64, size64, offset64, record_at):
    zip64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count64, count64, size64, offset64)
    locator = struct.pack("<IIQI", 0x07064B50, 0, record_at, 1)
    classic = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, offset, 0)
    return zip64 + locator + classic


def two_directories(base, name, data):
    """base: the bytes of a zip archive (a real package); returns the archive with two directories."""
    files = []
    with zipfile.ZipFile(io.BytesIO(base)) as z:
        for info in z.infolist():
            files.append((info.filename, z.read(info.filename)))
    out = b""
    first = b""
    offsets = []
    for n, d in files:
        offsets.append(len(out))
        out += _local(n, d)
    evil_at = len(out)
    out += _local(name, data)
    for (n, d), at in zip(files, offsets):
        first += _central(n, d, at)
    second = first + _central(name, data, evil_at)
    first_at = len(out)
    out += first
    second_at = len(out)
    out += second
    return out + _ends(len(files), len(first), first_at, len(files) + 1, len(second), second_at, len(out))


def wrapping_directory():
    # The record at 0, the locator, the end record: 56 + 20 + 22 bytes; the classic fields say
    # "see the ZIP64 record" (saturated), which names a directory of 64 GiB at 2^64 - 64 GiB:
    # offset + size is 0 modulo 2^64.
    return _ends(0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 1, 2**36, 2**64 - 2**36, 0)


def ordinary(comment=b"", compression=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        z.writestr("data/aotinductor/model/model.so", b"\x7fELF" if compression == zipfile.ZIP_STORED else DEFLATED_SO)
        z.writestr("data/aotinductor/model/model.cpp", b"// source\n")
        z.writestr("data/aotinductor/model/model_metadata.json", b"{}")
        z.comment = comment
    return buf.getvalue()


# deflated.zip's model.so: 70,000 bytes in 11 KiB, more than one 64 KiB round of inflating
# (test_aoti checks the extracted file against this).
DEFLATED_SO = b"".join(b"optrace %05d\n" % i for i in range(5000))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    crafted = {
        "two_directories.zip": two_directories(ordinary(), "data/aotinductor/model/../../../../tmp/x", b"x"),
        "wrapping_directory.zip": wrapping_directory(),
    }
    seeds = dict(crafted, **{"ordinary.zip": ordinary(), "commented.zip": ordinary(b"a comment"),
                             "deflated.zip": ordinary(compression=zipfile.ZIP_DEFLATED)})
    for folder, files in ((sys.argv[1], seeds), (sys.argv[2], crafted)):
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
