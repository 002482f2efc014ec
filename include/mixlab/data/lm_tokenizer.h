// mixlab/data/lm_tokenizer.h — the tokeniser of a language-modelling run: bytes or GPT-2 BPE.
//
//   bytes  vocabulary 256, token id = byte value; the document separator is '\n' (byte 10, which
//          normalised Brown text never contains)
//   gpt2   GPT-2's byte-level BPE (mixlab/data/gpt2_bpe.h), vocabulary 50257; the separator is
//          <|endoftext|> (id 50256), as in GPT-2's own training data
//   ids    no text: the stream is token ids already (a nanoGPT token file of another vocabulary,
//          e.g. character ids); the vocabulary is the run's `vocab`; every id counts as 1 "byte",
//          so bits per byte is bits per token; nothing to encode or decode (generate refuses)
// The separator starts every document of an LM stream (mixlab/data/lm_dataset.h) and is the
// begin token of `mixlab generate`. Both tokenisers are lossless on valid UTF-8.
//
// token_bytes(id) is the number of text bytes a token stands for; the separator counts as 1
// byte (the '\n' that joins two documents), so bits per byte are comparable across tokenisers.
// Not supported: other text vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixlab/data/gpt2_bpe.h"

namespace mixlab {

enum class LmTokenizerKind { kBytes, kGpt2, kIds };

/// "bytes" -> kBytes, "gpt2" -> kGpt2, "ids" -> kIds; anything else throws mixlab::Error naming
/// `what`.
LmTokenizerKind lm_tokenizer_parse(const std::string& name, const std::string& what);
const char* lm_tokenizer_name(LmTokenizerKind kind);
/// 256 or 50257, without reading any file; 0 for ids (the run's vocab says).
int64_t lm_tokenizer_vocab(LmTokenizerKind kind);

class LmTokenizer {
 public:
  /// bytes needs no file; gpt2 reads `gpt2_dir`/encoder.json and vocab.bpe (a missing file is a
  /// mixlab::Error naming it and scripts/setup.sh).
  static LmTokenizer load(LmTokenizerKind kind, const std::string& gpt2_dir);
  /// The GPT-2 files' folder: $MIXLAB_GPT2_DIR, else data/gpt2 (scripts/setup.sh puts them there).
  static std::string default_gpt2_dir();
  /// The ids tokeniser of a vocabulary of `vocab` ids, 1..65536.
  static LmTokenizer ids(int64_t vocab);

  LmTokenizerKind kind() const { return kind_; }
  const char* name() const { return lm_tokenizer_name(kind_); }
  int64_t vocab_size() const { return kind_ == LmTokenizerKind::kIds ? ids_vocab_ : lm_tokenizer_vocab(kind_); }
  /// bytes and gpt2 only (ids has no documents: mixlab::Error).
  int64_t separator() const;
  /// bytes and gpt2 only (ids has no text: mixlab::Error).
  std::vector<int64_t> encode(std::string_view text) const;
  /// The bytes of one token (the separator decodes to "\n").
  std::string decode_token(int64_t id) const;
  /// Text bytes per id (vocab_size entries; separator = 1).
  const std::vector<int64_t>& token_bytes() const { return token_bytes_; }

 private:
  LmTokenizerKind kind_ = LmTokenizerKind::kBytes;
  std::shared_ptr<const Gpt2Bpe> bpe_;  // gpt2 only
  std::vector<int64_t> token_bytes_;
  int64_t ids_vocab_ = 0;  // ids only
};

}  // namespace mixlab
