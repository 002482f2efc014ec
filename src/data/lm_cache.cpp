// The LM token cache: versioned header + checksum, atomic write, mmap read (mixlab/data/lm_cache.h).
#include "mixlab/data/lm_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/data/mapped_file.h"

namespace mixlab {
namespace {

constexpr const char* kMagic = "mixlab-lm-cache";
constexpr int kVersion = 1;

// The header lines covered by the checksum (everything but the checksum line itself).
std::string header_fields(const LmCacheInfo& i) {
  return fmt::format(
      "{} {}\ntokenizer {}\nsplit {}\ncorpus {:016x}\nvocab {}\ndocuments {}\ntokens {}\ntext_bytes {}\n", kMagic,
      kVersion, i.key.tokenizer, i.key.split, i.key.corpus, i.key.vocab, i.documents, i.tokens, i.text_bytes);
}

std::string_view payload_of(const uint16_t* tokens, int64_t n) {
  return {reinterpret_cast<const char*>(tokens), static_cast<size_t>(n) * sizeof(uint16_t)};
}

}  // namespace

void lm_cache_write(const std::string& path, const LmCacheInfo& info, const std::vector<uint16_t>& tokens) {
  MIXLAB_CHECK(static_cast<int64_t>(tokens.size()) == info.tokens, "lm_cache_write: info says {} tokens, got {}",
               info.tokens, tokens.size());
  for (uint16_t t : tokens)
    MIXLAB_CHECK(t < info.key.vocab, "lm_cache_write: token id {} outside the vocabulary of {}", t, info.key.vocab);
  const std::string fields = header_fields(info);
  const std::string_view payload = payload_of(tokens.data(), info.tokens);
  const uint64_t sum = checksum64(payload, checksum64(fields));
  std::string file = fields + fmt::format("checksum {:016x}\n", sum);
  MIXLAB_ASSERT(static_cast<int64_t>(file.size()) < kLmCacheHeaderBytes, "lm cache header too long");
  file.resize(static_cast<size_t>(kLmCacheHeaderBytes), '\0');
  file.append(payload.data(), payload.size());
  atomic_write_file(path, file);
}

std::shared_ptr<LmTokenFile> LmTokenFile::open(const std::string& path, const LmCacheKey& expected) {
  const std::string what = fmt::format("LM token cache '{}'", path);
  auto map = MappedFile::open(path, what);
  const auto size = static_cast<int64_t>(map->size());
  MIXLAB_CHECK(size >= kLmCacheHeaderBytes, "{}: truncated or corrupt (shorter than its {}-byte header)", what,
               kLmCacheHeaderBytes);
  std::shared_ptr<LmTokenFile> f(new LmTokenFile());
  f->path_ = path;
  const char* base = map->data();
  f->map_ = std::move(map);
  const std::string header(base, strnlen(base, static_cast<size_t>(kLmCacheHeaderBytes)));
  std::istringstream in(header);
  std::string magic, name;
  int version = 0;
  in >> magic >> version;
  MIXLAB_CHECK(magic == kMagic, "{}: not an LM token cache (no '{}' header)", what, kMagic);
  MIXLAB_CHECK(version == kVersion, "{}: format version {} is not supported (this mixlab reads version {})", what,
               version, kVersion);
  LmCacheInfo& i = f->info_;
  std::string corpus_hex, sum_hex;
  in >> name >> i.key.tokenizer;
  in >> name >> i.key.split;
  in >> name >> corpus_hex;
  in >> name >> i.key.vocab;
  in >> name >> i.documents;
  in >> name >> i.tokens;
  in >> name >> i.text_bytes;
  in >> name >> sum_hex;
  MIXLAB_CHECK(!in.fail() && name == "checksum" && corpus_hex.size() == 16 && sum_hex.size() == 16,
               "{}: truncated or corrupt header", what);
  for (const std::string* hex : {&corpus_hex, &sum_hex})
    MIXLAB_CHECK(hex->find_first_not_of("0123456789abcdef") == std::string::npos, "{}: truncated or corrupt header",
                 what);
  i.key.corpus = std::stoull(corpus_hex, nullptr, 16);
  const uint64_t stored = std::stoull(sum_hex, nullptr, 16);
  MIXLAB_CHECK(i.key.tokenizer == expected.tokenizer && i.key.split == expected.split &&
                   i.key.corpus == expected.corpus && i.key.vocab == expected.vocab,
               "{}: built for tokenizer {}, split {}, corpus {:016x}, vocab {}; expected {}, {}, {:016x}, {}", what,
               i.key.tokenizer, i.key.split, i.key.corpus, i.key.vocab, expected.tokenizer, expected.split,
               expected.corpus, expected.vocab);
  // The count is bounded by the file before it is doubled: 2 * tokens must not overflow.
  MIXLAB_CHECK(
      i.tokens >= 0 && i.tokens <= (size - kLmCacheHeaderBytes) / 2 && size == kLmCacheHeaderBytes + 2 * i.tokens,
      "{}: truncated or corrupt (the header says {} tokens, the file has {} bytes of tokens)", what, i.tokens,
      size - kLmCacheHeaderBytes);
  f->tokens_ = reinterpret_cast<const uint16_t*>(base + kLmCacheHeaderBytes);
  const uint64_t actual = checksum64(payload_of(f->tokens_, i.tokens), checksum64(header_fields(i)));
  MIXLAB_CHECK(actual == stored, "{}: checksum mismatch (stored {:016x}, computed {:016x}): the file is corrupt", what,
               stored, actual);
  // A right checksum says the file is what its writer wrote, not that its ids fit the vocabulary
  // (another program, or an older writer, may have put any uint16 there): checked once here, one
  // more pass over the payload the checksum just read, so no window ever indexes past the model's
  // embedding.
  const uint16_t* ids = f->tokens_;
  uint16_t largest = 0;
  for (int64_t k = 0; k < i.tokens; ++k) largest = std::max(largest, ids[k]);  // branch-free
  if (i.tokens > 0 && static_cast<int64_t>(largest) >= i.key.vocab) {
    for (int64_t k = 0; k < i.tokens; ++k)
      MIXLAB_CHECK(static_cast<int64_t>(ids[k]) < i.key.vocab,
                   "{}: token id {} at offset {} is outside the vocabulary of {} (expected ids in [0, {})): the file "
                   "is corrupt or was not written by mixlab",
                   what, ids[k], k, i.key.vocab, i.key.vocab);
  }
  return f;
}

}  // namespace mixlab
