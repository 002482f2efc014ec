// mixlab/data/lm_cache.h — a tokenised LM split on disk, read through mmap.
//
// File layout (version 1; integers little-endian, as every machine mixlab runs on):
//   bytes [0, 4096)  header: ASCII lines, then zero padding
//                      mixlab-lm-cache 1
//                      tokenizer <bytes|gpt2>
//                      split <train|valid|test>
//                      corpus <16 hex: checksum of the corpus' normalised documents>
//                      vocab <V>
//                      documents <n>
//                      tokens <N>
//                      text_bytes <bytes of the text the tokens stand for>
//                      checksum <16 hex: FNV-1a 64 of the lines above, then of the payload>
//   bytes [4096, 4096 + 2N)  the N token ids as uint16 (every supported vocabulary is < 65536)
// The cache key is (tokenizer, split, corpus); it is both in the file name (lm_dataset.h) and in
// the header, and LmTokenFile::open checks it, and every id against the vocabulary. Written
// with atomic_write_file (a reader never sees a half-written cache).
//
// Not supported: vocabularies >= 65536; big-endian machines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mixlab {

class MappedFile;  // mixlab/data/mapped_file.h

struct LmCacheKey {
  std::string tokenizer;  // "bytes" | "gpt2"
  std::string split;      // "train" | "valid" | "test"
  uint64_t corpus = 0;    // corpus identity (checksum of its documents)
  int64_t vocab = 0;
};

struct LmCacheInfo {
  LmCacheKey key;
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t text_bytes = 0;
};

/// Writes a cache file atomically. Throws mixlab::Error if an id does not fit the vocabulary,
/// mixlab::IoError if the file cannot be written.
void lm_cache_write(const std::string& path, const LmCacheInfo& info, const std::vector<uint16_t>& tokens);

/// A read-only memory mapping of a verified cache file.
class LmTokenFile {
 public:
  /// Maps `path` and verifies magic, version, key (== `expected`), size and checksum, then that
  /// every token id is < the vocabulary (one pass over the ids, at open; a file with a valid
  /// checksum may still hold larger ids if another program wrote it). Throws mixlab::IoError when
  /// the file cannot be opened, mixlab::Error naming the path and the problem when it is
  /// truncated, corrupt, for another key, or holds an id outside the vocabulary (naming the id
  /// and its offset).
  static std::shared_ptr<LmTokenFile> open(const std::string& path, const LmCacheKey& expected);
  LmTokenFile(const LmTokenFile&) = delete;
  LmTokenFile& operator=(const LmTokenFile&) = delete;

  const uint16_t* tokens() const { return tokens_; }
  const LmCacheInfo& info() const { return info_; }
  const std::string& path() const { return path_; }

 private:
  LmTokenFile() = default;
  std::shared_ptr<const MappedFile> map_;
  const uint16_t* tokens_ = nullptr;
  LmCacheInfo info_;
  std::string path_;
};

/// Size of the header block.
constexpr int64_t kLmCacheHeaderBytes = 4096;

}  // namespace mixlab
