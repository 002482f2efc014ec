// mixlab/data/lm_dataset.h — language modelling on the Brown corpus: a fixed document split, one
// tokenised stream per split (cached on disk, memory-mapped), training windows, evaluation windows.
//
// Split (fixed, by documents): the corpus' documents in name order (ca01, ca02, ..., cr09);
// document i (0-based) goes to valid when i % 10 == 1, to test when i % 10 == 2, else to train:
// 80 / 10 / 10 %, spread over every genre (Brown's names are grouped by genre). The full corpus
// (500 documents) gives 400 / 50 / 50; the 5-document sample 3 / 1 / 1.
//
// Stream of a split: for each document in name order, the separator token
// (mixlab/data/lm_tokenizer.h), then the document's tokens: [sep d_0 sep d_1 ... sep d_k]. The
// text it stands for is "d_0\nd_1\n...d_k" (the first separator is never predicted).
//
// Cache: <cache_dir>/lm-<corpus id>-<tokenizer>-<split>.v1.tok (mixlab/data/lm_cache.h), built on
// first use. A cache that fails verification (corrupt, truncated, other key, an id outside the
// vocabulary) is rebuilt in place and LmDataset::rebuilt() says so; the corpus id is a checksum
// of the normalised documents, so an edited corpus gets a new cache.
//
// Training windows: row b of step s starts at a position drawn uniformly in [0, N - T - 1] from
// a splitmix64 stream of (seed, step, b): the same (seed, step) give the same rows on every run,
// so resumed training sees exactly the batches of an uninterrupted one.
//
// Evaluation windows (lm_sliding_windows): the whole stream (or its first `limit` tokens) with
// input windows of length <= T starting every `stride` tokens; each target (stream position
// 1..N-1) is scored exactly once, in the first window that contains it, so every scored token
// after the first window sees at least T - stride tokens of context. Equivalently target t is
// predicted from tokens [c(t), t) with c(t) = stride * max(0, ceil((t - T) / stride)).
// Bits per byte = total NLL in nats / ln 2 / UTF-8 bytes of the scored tokens' text.
//
// Other corpora: any Corpus works (Brown, corpus.h; plain text, text_corpus.h); its id in the
// cache key is a checksum of its documents' names and texts. A nanoGPT token file is a stream
// without a split rule: LmDataset::open_bin maps train.bin or val.bin as it is.
//
// Not supported: sub-document splits.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixlab/data/corpus.h"
#include "mixlab/data/lm_cache.h"
#include "mixlab/data/lm_tokenizer.h"

namespace mixlab {

enum class LmSplit { kTrain, kValid, kTest };

/// "train" | "valid" | "test".
const char* lm_split_name(LmSplit split);
/// Parses a split name; throws mixlab::Error naming `what`.
LmSplit lm_split_parse(const std::string& name, const std::string& what);
/// The split of document number `index` (name order), by the rule above.
LmSplit lm_split_of(int64_t index);
/// Documents of `split`, in name order.
std::vector<CorpusDocument> lm_split_documents(const Corpus& corpus, LmSplit split);
/// Checksum of every document (name and text) in name order: the corpus part of the cache key.
uint64_t lm_corpus_id(const Corpus& corpus);

class LmDataset {
 public:
  /// Opens (building it first if missing or unusable) the cache of `split` under `cache_dir`
  /// (created if needed). Throws mixlab::Error when the split has no document,
  /// mixlab::IoError when the cache cannot be written.
  static LmDataset open(const Corpus& corpus, LmSplit split, const LmTokenizer& tokenizer,
                        const std::string& cache_dir);
  /// A nanoGPT token file (mixlab/data/token_bin.h) as the stream: mapped, not read; ids are
  /// checked against `vocab` window by window (check_ids). documents() and text_bytes() are 0
  /// (the file does not say).
  static LmDataset open_bin(const std::string& path, int64_t vocab);
  /// The cache folder: $MIXLAB_CACHE_DIR, else runs/cache.
  static std::string default_cache_dir();

  const uint16_t* tokens() const { return tokens_; }
  int64_t size() const { return size_; }  // N
  int64_t documents() const { return documents_; }
  int64_t text_bytes() const { return text_bytes_; }
  const std::string& path() const { return path_; }
  bool rebuilt() const { return rebuilt_; }  // an unusable cache file was replaced
  /// Throws mixlab::Error naming the file, offset and id when a token of [begin, begin + length)
  /// is >= the vocabulary (a token file's ids are checked here; a cache's once, when it is opened:
  /// LmTokenFile::open).
  void check_ids(int64_t begin, int64_t length) const;
  /// Tokens [begin, begin + length) as an int64 tensor (length); ids checked.
  torch::Tensor slice(int64_t begin, int64_t length) const;

 private:
  std::shared_ptr<const void> owner_;  // the mapping (LmTokenFile or TokenBinFile)
  const uint16_t* tokens_ = nullptr;
  int64_t size_ = 0, documents_ = 0, text_bytes_ = 0;
  std::string path_;
  int64_t unchecked_vocab_ = 0;  // > 0: ids not verified yet, check them against this
  bool rebuilt_ = false;
};

/// Training batch of `step`: inputs (B,T) and next-token targets (B,T), both int64. Throws
/// mixlab::Error when the stream has fewer than T + 1 tokens.
std::pair<torch::Tensor, torch::Tensor> lm_train_windows(const LmDataset& data, int64_t batch, int64_t T, uint64_t seed,
                                                         int64_t step);

struct LmWindow {
  int64_t begin = 0;       // inputs are stream[begin, begin + length)
  int64_t length = 0;      // <= T; targets are stream[begin + 1, begin + length + 1)
  int64_t score_from = 0;  // first input offset (0-based, in the window) whose target is scored
};

/// Sliding windows over a stream of `n` tokens (see the header). Throws mixlab::Error unless
/// T >= 1 and 1 <= stride <= T. Empty when n < 2.
std::vector<LmWindow> lm_sliding_windows(int64_t n, int64_t T, int64_t stride);

/// nll_nats / ln 2 / bytes. Throws mixlab::Error when bytes <= 0.
double lm_bits_per_byte(double nll_nats, int64_t bytes);

}  // namespace mixlab
