// mixlab/data/token_bin.h — a nanoGPT token file (`train.bin`, `val.bin`), read through mmap.
//
// Format (what nanoGPT's data/*/prepare.py writes with `np.array(ids, dtype=np.uint16).tofile`):
// no header, the token ids one after another as uint16 little-endian. Opening maps the file and
// reads nothing (a file of 10^8 tokens opens in microseconds; the pages are read as windows touch
// them), so ids are not checked at open: every window the `lm` task takes from the file is
// checked against the vocabulary as it is copied (LmDataset::check_ids), and an id >= vocab is a
// mixlab::Error naming the file, the offset and the id.
//
// Refused at open with a mixlab::Error naming the path: a missing file (mixlab::IoError), an odd
// size (not whole uint16s), an empty file.
//
// Not supported: uint32 ids (vocabularies over 65536), big-endian machines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace mixlab {

class MappedFile;  // mixlab/data/mapped_file.h

class TokenBinFile {
 public:
  /// Maps `path` read-only. Throws as described above.
  static std::shared_ptr<TokenBinFile> open(const std::string& path);
  TokenBinFile(const TokenBinFile&) = delete;
  TokenBinFile& operator=(const TokenBinFile&) = delete;

  const uint16_t* tokens() const { return tokens_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  TokenBinFile() = default;
  std::shared_ptr<const MappedFile> map_;
  const uint16_t* tokens_ = nullptr;
  int64_t size_ = 0;
  std::string path_;
};

}  // namespace mixlab
