// The LM tokeniser: bytes or GPT-2 BPE behind one interface (mixlab/data/lm_tokenizer.h).
#include "mixlab/data/lm_tokenizer.h"

#include <cstdlib>

#include "mixlab/core/error.h"

namespace mixlab {

namespace {
constexpr int64_t kByteSeparator = '\n';
constexpr int64_t kGpt2Vocab = 50257;
}  // namespace

LmTokenizerKind lm_tokenizer_parse(const std::string& name, const std::string& what) {
  if (name == "bytes") return LmTokenizerKind::kBytes;
  if (name == "gpt2") return LmTokenizerKind::kGpt2;
  if (name == "ids") return LmTokenizerKind::kIds;
  MIXLAB_FAIL("{} must be 'bytes', 'gpt2' or 'ids', got '{}'", what, name);
}

const char* lm_tokenizer_name(LmTokenizerKind kind) {
  switch (kind) {
    case LmTokenizerKind::kBytes:
      return "bytes";
    case LmTokenizerKind::kGpt2:
      return "gpt2";
    case LmTokenizerKind::kIds:
      return "ids";
  }
  return "?";
}

int64_t lm_tokenizer_vocab(LmTokenizerKind kind) {
  return kind == LmTokenizerKind::kBytes ? 256 : kind == LmTokenizerKind::kGpt2 ? kGpt2Vocab : 0;
}

LmTokenizer LmTokenizer::ids(int64_t vocab) {
  MIXLAB_CHECK(vocab >= 1 && vocab <= 65536, "LmTokenizer::ids: vocab must be in [1, 65536], got {}", vocab);
  LmTokenizer t;
  t.kind_ = LmTokenizerKind::kIds;
  t.ids_vocab_ = vocab;
  t.token_bytes_.assign(static_cast<size_t>(vocab), 1);
  return t;
}

std::string LmTokenizer::default_gpt2_dir() {
  const char* env = std::getenv("MIXLAB_GPT2_DIR");
  return env && *env ? std::string(env) : std::string("data/gpt2");
}

LmTokenizer LmTokenizer::load(LmTokenizerKind kind, const std::string& gpt2_dir) {
  MIXLAB_CHECK(kind != LmTokenizerKind::kIds, "LmTokenizer::load: the ids tokenizer needs its vocabulary (ids(V))");
  LmTokenizer t;
  t.kind_ = kind;
  if (kind == LmTokenizerKind::kBytes) {
    t.token_bytes_.assign(256, 1);
    return t;
  }
  t.bpe_ = std::make_shared<const Gpt2Bpe>(Gpt2Bpe::load(gpt2_dir));
  MIXLAB_CHECK(t.bpe_->vocab_size() == kGpt2Vocab, "LmTokenizer: '{}' holds {} GPT-2 tokens, expected {}", gpt2_dir,
               t.bpe_->vocab_size(), kGpt2Vocab);
  MIXLAB_CHECK(t.bpe_->end_of_text() >= 0, "LmTokenizer: '{}'/encoder.json has no <|endoftext|> token", gpt2_dir);
  t.token_bytes_.resize(static_cast<size_t>(kGpt2Vocab));
  for (int64_t id = 0; id < kGpt2Vocab; ++id)
    t.token_bytes_[static_cast<size_t>(id)] = static_cast<int64_t>(t.bpe_->decode({id}).size());
  t.token_bytes_[static_cast<size_t>(t.bpe_->end_of_text())] = 1;
  return t;
}

int64_t LmTokenizer::separator() const {
  MIXLAB_CHECK(kind_ != LmTokenizerKind::kIds,
               "the ids tokenizer has no documents and no separator (the stream is token ids without text)");
  return kind_ == LmTokenizerKind::kBytes ? kByteSeparator : bpe_->end_of_text();
}

std::vector<int64_t> LmTokenizer::encode(std::string_view text) const {
  MIXLAB_CHECK(kind_ != LmTokenizerKind::kIds,
               "the ids tokenizer has no text to encode (the stream is token ids; use tokenizer bytes or gpt2)");
  if (kind_ == LmTokenizerKind::kGpt2) return bpe_->encode(text);
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string LmTokenizer::decode_token(int64_t id) const {
  MIXLAB_CHECK(id >= 0 && id < vocab_size(), "LmTokenizer::decode_token: id must be in [0, {}), got {}", vocab_size(),
               id);
  if (kind_ == LmTokenizerKind::kIds) return fmt::format("<{}>", id);
  if (id == separator()) return "\n";
  if (kind_ == LmTokenizerKind::kBytes) return std::string(1, static_cast<char>(id));
  return bpe_->decode({id});
}

}  // namespace mixlab
