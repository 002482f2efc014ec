// The fuzz targets of the data files (tests/fuzz/fuzz_target.h): .npy/.npz arrays
// (NpyFile::from_bytes, every array read), the LM token cache (LmTokenFile::open on a file)
// and nanoGPT .bin token files (LmDataset::open_bin on a file, then its ids checked and windows
// taken as training and evaluation take them). Also the writer of the cache's seeds.
#include <algorithm>

#include "fuzz/fuzz_target.h"
#include "fuzz/scratch_file.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/data/lm_cache.h"
#include "mixlab/data/lm_dataset.h"
#include "mixlab/data/npy.h"

namespace mixlab::fuzz {
namespace {

// The key fuzz_lm_cache opens every input under (a cache of another key is refused by name).
LmCacheKey lm_cache_key() {
  LmCacheKey key;
  key.tokenizer = "bytes";
  key.split = "train";
  key.corpus = 0x0123456789abcdefULL;
  key.vocab = 256;
  return key;
}

// The vocabulary a .bin is read with: small, so mutated ids fall outside it often.
constexpr int64_t kTokenBinVocab = 1000;

void check_array(const NpyArray& a, const std::string& what) {
  int64_t numel = 1;
  for (int64_t s : a.shape) numel *= s;
  if (numel != a.numel())
    throw FuzzFinding("npy: " + what + " has shape " + a.shape_string() + " but " + std::to_string(a.numel()) +
                      " values");
}

}  // namespace

void fuzz_npy(std::string_view bytes) {
  const NpyFile file = NpyFile::from_bytes(std::string(bytes), "fuzz");
  if (!file.is_npz()) {
    check_array(file.array(), "the array");
    return;
  }
  for (const std::string& name : file.names()) {
    if (!file.contains(name)) throw FuzzFinding("npy: names() lists '" + name + "' but contains() denies it");
    check_array(file.array(name), "array '" + name + "'");
  }
}

void fuzz_lm_cache(std::string_view bytes) {
  const auto file = LmTokenFile::open(scratch_file_write(bytes, ".tok"), lm_cache_key());
  // The mapped ids are read as training reads them.
  uint16_t worst = 0;
  for (int64_t i = 0; i < file->info().tokens; ++i) worst = std::max(worst, file->tokens()[i]);
  (void)worst;
}

void fuzz_token_bin(std::string_view bytes) {
  const LmDataset data = LmDataset::open_bin(scratch_file_write(bytes, ".bin"), kTokenBinVocab);
  data.check_ids(0, data.size());
  (void)data.slice(0, std::min<int64_t>(data.size(), 64));
  if (data.size() >= 5) (void)lm_train_windows(data, 2, 4, 7, 0);
  int64_t taken = 0;
  for (const LmWindow& w : lm_sliding_windows(data.size(), 8, 4)) {
    (void)data.slice(w.begin, w.length + 1);
    if (++taken == 16) break;
  }
}

std::string fuzz_lm_cache_seed(const std::vector<uint16_t>& tokens) {
  LmCacheInfo info;
  info.key = lm_cache_key();
  info.documents = 1;
  info.tokens = static_cast<int64_t>(tokens.size());
  info.text_bytes = static_cast<int64_t>(tokens.size());
  const std::string& path = scratch_file_write("", ".seed.tok");
  lm_cache_write(path, info, tokens);
  return file_read(path, int64_t{1} << 20, "LM token cache seed");
}

}  // namespace mixlab::fuzz
