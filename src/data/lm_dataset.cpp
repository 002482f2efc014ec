// Brown LM split, cached token streams, training and evaluation windows (mixlab/data/lm_dataset.h).
#include "mixlab/data/lm_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/data/token_bin.h"

namespace mixlab {
namespace {

// splitmix64: the window sampler's own integer stream (same on every platform).
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t below(uint64_t& s, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = splitmix(s);
  } while (r >= limit);
  return r % n;
}

std::vector<CorpusDocument> all_documents(const Corpus& corpus) {
  std::vector<CorpusDocument> docs = corpus.documents(Split::kTrain);
  const auto& v = corpus.documents(Split::kValidation);
  docs.insert(docs.end(), v.begin(), v.end());
  std::sort(docs.begin(), docs.end(), [](const CorpusDocument& a, const CorpusDocument& b) { return a.name < b.name; });
  return docs;
}

void build_cache(const std::string& path, const std::vector<CorpusDocument>& docs, const LmTokenizer& tok,
                 const LmCacheKey& key) {
  std::vector<uint16_t> ids;
  LmCacheInfo info;
  info.key = key;
  info.documents = static_cast<int64_t>(docs.size());
  for (const auto& d : docs) {
    ids.push_back(static_cast<uint16_t>(tok.separator()));
    std::vector<int64_t> encoded;
    try {
      encoded = tok.encode(d.text);
    } catch (const Error& e) {  // e.g. gpt2 on bytes that are not UTF-8: say which document
      MIXLAB_FAIL("LM corpus document '{}' ({} tokenizer): {}", d.name, tok.name(), e.what());
    }
    for (int64_t id : encoded) ids.push_back(static_cast<uint16_t>(id));
    info.text_bytes += static_cast<int64_t>(d.text.size());
  }
  info.text_bytes += std::max<int64_t>(0, info.documents - 1);  // the '\n' between documents
  info.tokens = static_cast<int64_t>(ids.size());
  lm_cache_write(path, info, ids);
}

}  // namespace

const char* lm_split_name(LmSplit split) {
  switch (split) {
    case LmSplit::kTrain:
      return "train";
    case LmSplit::kValid:
      return "valid";
    case LmSplit::kTest:
      return "test";
  }
  return "?";
}

LmSplit lm_split_parse(const std::string& name, const std::string& what) {
  for (LmSplit s : {LmSplit::kTrain, LmSplit::kValid, LmSplit::kTest})
    if (name == lm_split_name(s)) return s;
  MIXLAB_FAIL("{} must be train, valid or test, got '{}'", what, name);
}

LmSplit lm_split_of(int64_t index) {
  const int64_t r = index % 10;
  return r == 1 ? LmSplit::kValid : r == 2 ? LmSplit::kTest : LmSplit::kTrain;
}

std::vector<CorpusDocument> lm_split_documents(const Corpus& corpus, LmSplit split) {
  std::vector<CorpusDocument> out;
  const auto docs = all_documents(corpus);
  for (size_t i = 0; i < docs.size(); ++i)
    if (lm_split_of(static_cast<int64_t>(i)) == split) out.push_back(docs[i]);
  return out;
}

uint64_t lm_corpus_id(const Corpus& corpus) {
  uint64_t h = checksum64("brown-lm");
  for (const auto& d : all_documents(corpus)) {
    h = checksum64(d.name, h);
    h = checksum64(std::string_view("\0", 1), h);
    h = checksum64(d.text, h);
    h = checksum64(std::string_view("\0", 1), h);
  }
  return h;
}

std::string LmDataset::default_cache_dir() {
  const char* env = std::getenv("MIXLAB_CACHE_DIR");
  return env && *env ? std::string(env) : std::string("runs/cache");
}

LmDataset LmDataset::open(const Corpus& corpus, LmSplit split, const LmTokenizer& tokenizer,
                          const std::string& cache_dir) {
  const auto docs = lm_split_documents(corpus, split);
  MIXLAB_CHECK(!docs.empty(),
               "LmDataset: corpus '{}' has no {} document (it has {} documents; the 80/10/10 split by document "
               "needs >= {})",
               corpus.source(), lm_split_name(split), all_documents(corpus).size(), split == LmSplit::kTest ? 3 : 2);
  LmCacheKey key{tokenizer.name(), lm_split_name(split), lm_corpus_id(corpus), tokenizer.vocab_size()};
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  MIXLAB_CHECK_IO(!ec, "LM token cache: cannot create the folder '{}': {}", cache_dir, ec.message());
  const std::string path = fmt::format("{}/lm-{:016x}-{}-{}.v1.tok", cache_dir, key.corpus, key.tokenizer, key.split);
  LmDataset d;
  std::shared_ptr<LmTokenFile> file;
  if (std::filesystem::exists(path, ec)) {
    try {
      file = LmTokenFile::open(path, key);
    } catch (const IoError&) {
      throw;
    } catch (const Error&) {
      d.rebuilt_ = true;  // corrupt, truncated or another key: rebuilt below, atomically
    }
  }
  if (!file) {
    build_cache(path, docs, tokenizer, key);
    file = LmTokenFile::open(path, key);
  }
  d.tokens_ = file->tokens();
  d.size_ = file->info().tokens;
  d.documents_ = file->info().documents;
  d.text_bytes_ = file->info().text_bytes;
  d.path_ = file->path();
  d.owner_ = std::move(file);
  return d;
}

LmDataset LmDataset::open_bin(const std::string& path, int64_t vocab) {
  MIXLAB_CHECK(vocab >= 1 && vocab <= 65536, "LmDataset::open_bin: vocab must be in [1, 65536] (uint16 ids), got {}",
               vocab);
  auto file = TokenBinFile::open(path);
  LmDataset d;
  d.tokens_ = file->tokens();
  d.size_ = file->size();
  d.path_ = file->path();
  d.unchecked_vocab_ = vocab;
  d.owner_ = std::move(file);
  return d;
}

void LmDataset::check_ids(int64_t begin, int64_t length) const {
  if (unchecked_vocab_ <= 0) return;
  const uint16_t* p = tokens_ + begin;
  const auto limit = static_cast<uint16_t>(unchecked_vocab_ - 1);  // vocab <= 65536: fits
  uint16_t worst = 0;
  for (int64_t i = 0; i < length; ++i) worst = std::max(worst, p[i]);  // one pass, branch-free
  if (worst <= limit) return;
  for (int64_t i = 0; i < length; ++i)
    MIXLAB_CHECK(p[i] <= limit,
                 "token file '{}': token id {} at offset {} is outside the vocabulary of {} (set vocab=)", path_, p[i],
                 begin + i, unchecked_vocab_);
}

torch::Tensor LmDataset::slice(int64_t begin, int64_t length) const {
  MIXLAB_CHECK(begin >= 0 && length >= 0 && begin + length <= size(),
               "LmDataset::slice: [{}, {}) is outside the stream of {} tokens", begin, begin + length, size());
  check_ids(begin, length);
  auto out = torch::empty({length}, torch::kInt64);
  auto* p = out.data_ptr<int64_t>();
  const uint16_t* src = tokens() + begin;
  for (int64_t i = 0; i < length; ++i) p[i] = src[i];
  return out;
}

std::pair<torch::Tensor, torch::Tensor> lm_train_windows(const LmDataset& data, int64_t batch, int64_t T, uint64_t seed,
                                                         int64_t step) {
  MIXLAB_CHECK(batch >= 1 && T >= 1, "lm_train_windows: batch and T must be >= 1, got {} and {}", batch, T);
  MIXLAB_CHECK(data.size() >= T + 1, "lm_train_windows: the stream '{}' has {} tokens, fewer than T + 1 = {}",
               data.path(), data.size(), T + 1);
  auto inputs = torch::empty({batch, T}, torch::kInt64), targets = torch::empty({batch, T}, torch::kInt64);
  auto* in = inputs.data_ptr<int64_t>();
  auto* tg = targets.data_ptr<int64_t>();
  const auto starts = static_cast<uint64_t>(data.size() - T);  // start in [0, N - T - 1]
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t s = seed ^ 0x4C4D57494E444F57ull;  // "LMWINDOW"
    splitmix(s);
    s ^= static_cast<uint64_t>(step) * 0xD1B54A32D192ED03ull;
    splitmix(s);
    s ^= static_cast<uint64_t>(b) * 0x9E3779B97F4A7C15ull;
    const auto start = static_cast<int64_t>(below(s, starts));
    data.check_ids(start, T + 1);
    const uint16_t* src = data.tokens() + start;
    for (int64_t t = 0; t < T; ++t) {
      in[b * T + t] = src[t];
      tg[b * T + t] = src[t + 1];
    }
  }
  return {inputs, targets};
}

std::vector<LmWindow> lm_sliding_windows(int64_t n, int64_t T, int64_t stride) {
  MIXLAB_CHECK(T >= 1, "lm_sliding_windows: window length T must be >= 1, got {}", T);
  MIXLAB_CHECK(stride >= 1 && stride <= T, "lm_sliding_windows: stride must be in [1, T = {}], got {}", T, stride);
  std::vector<LmWindow> out;
  int64_t next = 1;  // first target position not scored yet
  for (int64_t b = 0; next < n; b += stride) {
    const int64_t e = std::min(b + T, n - 1);  // inputs [b, e), targets [b + 1, e + 1)
    out.push_back({b, e - b, next - (b + 1)});
    next = e + 1;
  }
  return out;
}

double lm_bits_per_byte(double nll_nats, int64_t bytes) {
  MIXLAB_CHECK(bytes > 0, "lm_bits_per_byte: bytes must be > 0, got {}", bytes);
  return nll_nats / std::log(2.0) / static_cast<double>(bytes);
}

}  // namespace mixlab
