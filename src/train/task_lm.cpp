// The `lm` task: windows of a token stream — Brown, a plain-text corpus or nanoGPT token files
// (mixlab/train/task_lm.h).
#include "mixlab/train/task_lm.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "mixlab/core/error.h"
#include "mixlab/data/text_corpus.h"

namespace mixlab {
namespace {

constexpr int64_t kMaxTokenId = 65536;  // uint16 streams (lm_cache.h, token_bin.h)

const Corpus& text_corpus(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, Corpus> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) it = loaded.emplace(path, text_corpus_load(path)).first;
  return it->second;
}

std::string bin_path(const TaskSpec& spec, LmSplit split) {
  // nanoGPT's prepare.py writes train.bin and val.bin; a test.bin beside them is read when present.
  const char* name = split == LmSplit::kTrain ? "train.bin" : split == LmSplit::kValid ? "val.bin" : "test.bin";
  const std::string path = (std::filesystem::path(spec.tokens) / name).string();
  std::error_code ec;
  MIXLAB_CHECK(std::filesystem::is_directory(spec.tokens, ec),
               "task lm: tokens '{}' is not a folder (expected a folder holding nanoGPT's train.bin and val.bin)",
               spec.tokens);
  MIXLAB_CHECK(split != LmSplit::kTest || std::filesystem::exists(path, ec),
               "task lm: tokens folder '{}' has no test.bin (nanoGPT's prepare.py writes train.bin and val.bin; "
               "evaluate the valid split, or add test.bin)",
               spec.tokens);
  MIXLAB_CHECK(std::filesystem::exists(path, ec),
               "task lm: tokens folder '{}' has no {} (nanoGPT's prepare.py writes "
               "train.bin and val.bin)",
               spec.tokens, name);
  return path;
}

}  // namespace

const LmTokenizer& lm_task_tokenizer(const TaskSpec& spec) {
  const LmTokenizerKind kind = lm_tokenizer_parse(spec.tokenizer, "task lm: tokenizer");
  const int64_t ids_vocab = kind == LmTokenizerKind::kIds ? spec.vocab : 0;
  static std::mutex mutex;
  static std::map<std::pair<LmTokenizerKind, int64_t>, LmTokenizer> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find({kind, ids_vocab});
  if (it == loaded.end()) {
    it = loaded
             .emplace(std::make_pair(kind, ids_vocab), kind == LmTokenizerKind::kIds
                                                           ? LmTokenizer::ids(ids_vocab)
                                                           : LmTokenizer::load(kind, LmTokenizer::default_gpt2_dir()))
             .first;
  }
  return it->second;
}

const LmDataset& lm_task_dataset(const TaskSpec& spec, LmSplit split) {
  lm_validate(spec);
  static std::mutex mutex;
  using Key = std::tuple<std::string, std::string, std::string, int64_t, LmSplit>;
  static std::map<Key, LmDataset> opened;
  const Key key{spec.tokenizer, spec.corpus, spec.tokens, spec.vocab, split};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = opened.find(key);
    if (it != opened.end()) return it->second;
  }
  // Built outside the lock (a corpus may take seconds to tokenise); the first insert wins.
  LmDataset d;
  if (!spec.tokens.empty()) {
    d = LmDataset::open_bin(bin_path(spec, split), spec.vocab);
  } else {
    const LmTokenizer& tok = lm_task_tokenizer(spec);
    const Corpus& corpus = spec.corpus.empty() ? task_text_corpus() : text_corpus(spec.corpus);
    d = LmDataset::open(corpus, split, tok, LmDataset::default_cache_dir());
  }
  std::lock_guard<std::mutex> lock(mutex);
  return opened.emplace(key, std::move(d)).first->second;
}

void lm_validate(const TaskSpec& spec) {
  const LmTokenizerKind kind = lm_tokenizer_parse(spec.tokenizer, "task lm: tokenizer");
  MIXLAB_CHECK(spec.corpus.empty() || spec.tokens.empty(),
               "task lm: corpus and tokens are two sources of data; give one of them, got corpus '{}' and tokens '{}'",
               spec.corpus, spec.tokens);
  if (spec.tokens.empty()) {
    MIXLAB_CHECK(kind != LmTokenizerKind::kIds,
                 "task lm: tokenizer ids reads token files (tokens=DIR); a text corpus needs bytes or gpt2");
    MIXLAB_CHECK(spec.vocab == lm_tokenizer_vocab(kind),
                 "task lm: vocab must be the {} tokenizer's vocabulary size {}, got {} (leave 'vocab' unset)",
                 spec.tokenizer, lm_tokenizer_vocab(kind), spec.vocab);
  } else {
    // A token file's ids index the model's vocabulary; gpt2's may be padded (nanoGPT uses 50304).
    const int64_t least = kind == LmTokenizerKind::kIds ? 1 : lm_tokenizer_vocab(kind);
    MIXLAB_CHECK(spec.vocab >= least && spec.vocab <= kMaxTokenId,
                 "task lm: with tokens=, vocab must be in [{}, {}] for the {} tokenizer (uint16 ids), got {}", least,
                 kMaxTokenId, spec.tokenizer, spec.vocab);
  }
  MIXLAB_CHECK(spec.length >= 1, "task lm: length (the window T) must be >= 1, got {}", spec.length);
}

Batch lm_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed, LmSplit split) {
  auto [inputs, targets] = lm_train_windows(lm_task_dataset(spec, split), batch_size, spec.length, seed, step);
  Batch out;
  out.tokens = inputs;
  out.targets = targets;
  out.mask = torch::ones(inputs.sizes(), torch::kFloat32);
  out.answer = torch::full_like(inputs, -1);
  out.hops = torch::full_like(inputs, -1);
  out.length = spec.length;
  return out;
}

}  // namespace mixlab
