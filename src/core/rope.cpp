#include "mixlab/core/rope.h"

#include <cmath>
#include <deque>
#include <mutex>
#include <tuple>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

RopeTable rope_table(int64_t start, int64_t T, int64_t D, double base, torch::ScalarType dtype) {
  MIXLAB_CHECK(D > 0 && D % 2 == 0, "rope_table: head dim D must be even and > 0, got {}", D);
  MIXLAB_CHECK(start >= 0, "rope_table: start must be >= 0, got {}", start);
  MIXLAB_CHECK(T >= 0, "rope_table: T must be >= 0, got {}", T);
  using Key = std::tuple<int64_t, int64_t, int64_t, double, torch::ScalarType>;
  struct Entry {
    Key key;
    RopeTable table;
  };
  // A few entries: training asks for one (start 0, the training length) per head dim; chunked
  // prefill asks for a new start per chunk and must not evict it.
  constexpr size_t kEntries = 8;
  static std::mutex mutex;
  static std::deque<Entry> cache;
  const Key key{start, T, D, base, dtype};
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& e : cache)
      if (e.key == key) return e.table;
  }
  // Ordinary tensors even when the first caller decodes under InferenceMode: a later training
  // call saves them for backward, which inference tensors refuse.
  c10::InferenceMode normal_tensors(false);
  torch::NoGradGuard no_grad;
  // Angles in double, then cast: positions up to 2^24 keep full precision.
  auto pos = torch::arange(start, start + T, torch::dtype(torch::kDouble));
  auto inv = torch::pow(base, -torch::arange(0, D / 2, torch::dtype(torch::kDouble)) * 2.0 / D);
  auto ang = torch::outer(pos, inv);  // (T, D/2)
  RopeTable table{ang.cos().to(dtype).contiguous(), ang.sin().to(dtype).contiguous()};
  std::lock_guard<std::mutex> lock(mutex);
  cache.push_front({key, table});
  if (cache.size() > kEntries) cache.pop_back();
  return table;
}

torch::Tensor rope_apply(const torch::Tensor& x, int64_t start, double base) {
  check_dim("rope_apply", "x", x, 4, "(B,H,T,D)");
  const int64_t T = x.size(2), D = x.size(3);
  MIXLAB_CHECK(D % 2 == 0, "rope_apply: head dim D must be even, got {}", D);
  MIXLAB_CHECK(start >= 0, "rope_apply: start must be >= 0, got {}", start);
  if (D == 0) return x.clone();
  const auto table = rope_table(start, T, D, base, x.scalar_type());
  const auto &cos = table.cos, &sin = table.sin;
  auto x1 = x.narrow(3, 0, D / 2), x2 = x.narrow(3, D / 2, D / 2);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, 3);
}

std::vector<double> rope_inv_freq(int64_t D, double base) {
  MIXLAB_CHECK(D > 0 && D % 2 == 0, "rope_inv_freq: head dim D must be even and > 0, got {}", D);
  std::vector<double> inv(static_cast<size_t>(D / 2));
  // As rope_apply: pow(base, -d * 2.0 / D), in double.
  for (int64_t d = 0; d < D / 2; ++d) inv[d] = std::pow(base, -static_cast<double>(d) * 2.0 / static_cast<double>(D));
  return inv;
}

template <typename T>
void rope_rows(T* x, int64_t rows, int64_t D, int64_t pos, const std::vector<double>& inv_freq) {
  const int64_t half = D / 2;
  MIXLAB_CHECK(D % 2 == 0 && static_cast<int64_t>(inv_freq.size()) == half,
               "rope_rows: head dim D = {} must be even with D/2 rates, got {}", D, inv_freq.size());
  MIXLAB_CHECK(pos >= 0, "rope_rows: pos must be >= 0, got {}", pos);
  thread_local std::vector<T> table;
  table.resize(static_cast<size_t>(D));
  T* cos = table.data();
  T* sin = cos + half;
  for (int64_t d = 0; d < half; ++d) {
    const double angle = static_cast<double>(pos) * inv_freq[d];
    cos[d] = static_cast<T>(std::cos(angle));
    sin[d] = static_cast<T>(std::sin(angle));
  }
  for (int64_t r = 0; r < rows; ++r) {
    T* x1 = x + r * D;
    T* x2 = x1 + half;
    for (int64_t d = 0; d < half; ++d) {
      const T a = x1[d], b = x2[d];
      x1[d] = a * cos[d] - b * sin[d];
      x2[d] = a * sin[d] + b * cos[d];
    }
  }
}

template void rope_rows<float>(float*, int64_t, int64_t, int64_t, const std::vector<double>&);
template void rope_rows<double>(double*, int64_t, int64_t, int64_t, const std::vector<double>&);

}  // namespace mixlab
