// textcopy batches: uniform span sampling over a split's documents, doubled, next-token targets.
#include "mixlab/data/textcopy.h"

#include <algorithm>
#include <vector>

#include "mixlab/core/error.h"

namespace mixlab {

namespace {

/// Uniform integer in [0, n) from a 64-bit generator by rejection (same on every platform).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);  // largest multiple of n, exclusive
  uint64_t v;
  do {
    v = rng();
  } while (v >= limit);
  return v % n;
}

}  // namespace

TextCopyBatch textcopy_batch(const Corpus& corpus, int64_t batch, int64_t L, std::mt19937_64& rng, Split split) {
  const char* fn = "textcopy_batch";
  MIXLAB_CHECK(batch > 0, "{}: batch must be positive, got {}", fn, batch);
  MIXLAB_CHECK(L > 0, "{}: span length L must be positive, got {}", fn, L);
  const auto& docs = corpus.documents(split);
  // starts[i] = number of length-L spans in documents [0, i): spans are numbered across documents.
  std::vector<uint64_t> starts(docs.size() + 1, 0);
  int64_t longest = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto len = static_cast<int64_t>(docs[i].text.size());
    longest = std::max(longest, len);
    starts[i + 1] = starts[i] + static_cast<uint64_t>(len >= L ? len - L + 1 : 0);
  }
  MIXLAB_CHECK(starts.back() > 0, "{}: no {} document of corpus '{}' has L = {} tokens ({} documents, longest {})", fn,
               split_name(split), corpus.source(), L, docs.size(), longest);
  const int64_t S = 2 * L - 1;
  TextCopyBatch out;
  out.inputs = torch::empty({batch, S}, torch::kLong);
  out.targets = torch::empty({batch, S}, torch::kLong);
  out.mask = torch::zeros({batch, S}, torch::kFloat);
  auto in = out.inputs.accessor<int64_t, 2>();
  auto tg = out.targets.accessor<int64_t, 2>();
  auto mk = out.mask.accessor<float, 2>();
  std::vector<int64_t> q(2 * L);
  for (int64_t b = 0; b < batch; ++b) {
    const uint64_t r = uniform_below(rng, starts.back());
    const size_t d = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), r) - starts.begin()) - 1;
    const auto offset = static_cast<size_t>(r - starts[d]);
    const std::string& text = docs[d].text;
    for (int64_t p = 0; p < L; ++p) q[p] = q[p + L] = static_cast<unsigned char>(text[offset + p]);
    for (int64_t p = 0; p < S; ++p) {
      in[b][p] = q[p];
      tg[b][p] = q[p + 1];
      mk[b][p] = p >= L - 1 ? 1.0f : 0.0f;
    }
  }
  return out;
}

TextCopyBatch textcopy_batch(const Corpus& corpus, int64_t batch, int64_t L, uint64_t seed, Split split) {
  std::mt19937_64 rng(seed);
  return textcopy_batch(corpus, batch, L, rng, split);
}

}  // namespace mixlab
