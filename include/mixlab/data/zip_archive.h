// mixlab/data/zip_archive.h — the entries of a zip archive held in memory: the container of
// NumPy's .npz files (mixlab/data/npy.h).
//
// Reads what Python's zipfile writes for np.savez (method 0, stored) and np.savez_compressed
// (method 8, deflate, inflated with zlib), zip64 records included: NumPy opens every entry with
// force_zip64, so its local headers carry 0xFFFFFFFF sizes and a zip64 extra field. Entries are
// found through the central directory (the local headers are only used to find where the data
// starts), so a data descriptor after the data needs no special case. Every entry's CRC-32 is
// checked. Errors are mixlab::Error, one line naming `origin` (the file) and what was expected
// and what was found.
//
// Not supported (refused by name): encrypted entries, multi-disk archives, compression methods
// other than stored and deflate (bzip2, lzma, ...), entries larger than kZipMaxEntryBytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mixlab {

/// The largest entry a reader inflates (16 GiB): a corrupt size field must not allocate more.
constexpr int64_t kZipMaxEntryBytes = int64_t{1} << 34;

struct ZipEntry {
  std::string name;   // the path inside the archive, e.g. "inputs.npy"
  std::string bytes;  // the uncompressed contents
};

/// True when `bytes` starts like a zip archive: a local file header ("PK\3\4") or, for an
/// archive without entries, the end of central directory record ("PK\5\6").
bool zip_is_archive(std::string_view bytes);

/// Every entry of the archive `bytes`, in central directory order, uncompressed and
/// CRC-checked. `origin` names the archive in messages.
std::vector<ZipEntry> zip_read_entries(std::string_view bytes, const std::string& origin);

}  // namespace mixlab
