// Next-token sampling: greedy, temperature, top-k, top-p (mixlab/model/sampling.h).
#include "mixlab/model/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mixlab/core/error.h"

namespace mixlab {

void sampling_validate(const SamplingOptions& o) {
  MIXLAB_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, "--temperature must be >= 0 (0 = greedy), got {}",
               o.temperature);
  MIXLAB_CHECK(o.top_k >= 0, "--top-k must be >= 0 (0 = off), got {}", o.top_k);
  MIXLAB_CHECK(std::isfinite(o.top_p) && o.top_p > 0 && o.top_p <= 1, "--top-p must be in (0, 1] (1 = off), got {}",
               o.top_p);
}

std::vector<double> sampling_distribution(const torch::Tensor& logits, const SamplingOptions& o) {
  sampling_validate(o);
  MIXLAB_CHECK(logits.dim() == 1 && logits.numel() >= 1 && logits.is_floating_point(),
               "sampling_distribution: logits must be (V) floating point, got [{}]", fmt::join(logits.sizes(), ","));
  const auto l = logits.to(torch::kFloat64).contiguous();
  const double* x = l.data_ptr<double>();
  const auto V = static_cast<size_t>(l.numel());
  std::vector<double> p(V, 0.0);
  if (o.temperature == 0) {
    p[static_cast<size_t>(std::max_element(x, x + V) - x)] = 1.0;  // first maximum = lowest id
    return p;
  }
  const double m = *std::max_element(x, x + V);
  for (size_t i = 0; i < V; ++i) p[i] = std::exp((x[i] - m) / o.temperature);
  if (o.top_k == 0 && o.top_p >= 1) {  // no filter: skip the sort (V = 50257 for gpt2)
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& v : p) v /= total;
    return p;
  }
  // Ids by decreasing probability, ties by increasing id.
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  size_t keep = o.top_k > 0 ? std::min(V, static_cast<size_t>(o.top_k)) : V;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[order[i]];
  if (o.top_p < 1) {
    double mass = 0;
    size_t n = 0;
    while (n < keep) {
      mass += p[order[n]] / total;
      ++n;
      if (mass >= o.top_p) break;
    }
    keep = n;
  }
  std::vector<double> out(V, 0.0);
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[order[i]];
  for (size_t i = 0; i < keep; ++i) out[order[i]] = p[order[i]] / kept;
  return out;
}

int64_t sampling_pick(const std::vector<double>& probs, double u) {
  MIXLAB_CHECK(!probs.empty() && u >= 0 && u < 1, "sampling_pick: need a distribution and u in [0, 1), got u = {}", u);
  double c = 0;
  int64_t last = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    c += probs[i];
    last = static_cast<int64_t>(i);
    if (u < c) return last;
  }
  MIXLAB_CHECK(last >= 0, "sampling_pick: the distribution has no positive probability");
  return last;
}

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

int64_t Sampler::next(const torch::Tensor& logits, const SamplingOptions& o) {
  const auto p = sampling_distribution(logits, o);
  return o.temperature == 0 ? sampling_pick(p, 0.0) : sampling_pick(p, uniform());
}

}  // namespace mixlab
