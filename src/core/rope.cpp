#include "mixlab/core/rope.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
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

namespace {

// The composed rotation: (x1 cos − x2 sin, x1 sin + x2 cos); sign −1 rotates back (the
// transpose, backward's map). Differentiable, any dtype and device.
torch::Tensor rope_composed(const torch::Tensor& x, const RopeTable& table, double sign = 1.0) {
  const int64_t D = x.size(3);
  const auto& cos = table.cos;
  const auto sin = sign > 0 ? table.sin : -table.sin;
  auto x1 = x.narrow(3, 0, D / 2), x2 = x.narrow(3, D / 2, D / 2);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, 3);
}

// The same rotation in one pass over raw memory: x (B,H,T,D) of any strides → a contiguous
// (B,H,T,D) tensor, the composed form's per-element arithmetic (two products, one sum each,
// rounded in T as its ops round them). sign −1: the inverse rotation.
template <typename T>
void rope_rotate(const torch::Tensor& x, torch::Tensor& out, const RopeTable& table, bool inverse) {
  const int64_t B = x.size(0), H = x.size(1), TT = x.size(2), D = x.size(3), half = D / 2;
  const int64_t sb = x.stride(0), sh = x.stride(1), st = x.stride(2), sd = x.stride(3);
  const T* xp = x.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const T* cos = table.cos.data_ptr<T>();
  const T* sin = table.sin.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, TT * D));
  at::parallel_for(0, B * H, grain, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      for (int64_t t = 0; t < TT; ++t) {
        const T* src = xp + b * sb + h * sh + t * st;
        T* dst = op + (bh * TT + t) * D;
        const T* c = cos + t * half;
        const T* s = sin + t * half;
        for (int64_t d = 0; d < half; ++d) {
          const T a = src[d * sd], e = src[(d + half) * sd];
          const T sd_ = inverse ? -s[d] : s[d];
          const T r1 = a * c[d], r2 = e * sd_;
          const T r3 = a * sd_, r4 = e * c[d];
          dst[d] = r1 - r2;
          dst[d + half] = r3 + r4;
        }
      }
    }
  });
}

bool rope_native_ok(const torch::Tensor& x) {
  return x.device().is_cpu() && x.layout() == torch::kStrided &&
         (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) && !ComposedRopeGuard::active();
}

torch::Tensor rope_native(const torch::Tensor& x, const RopeTable& table, bool inverse) {
  auto out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  if (x.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rope_apply", [&] { rope_rotate<scalar_t>(x, out, table, inverse); });
  return out;
}

// rope_apply's autograd node: forward and backward each one native pass (backward rotates the
// gradient back: the rotation's transpose). A backward that must itself be differentiable
// (create_graph) rotates back through the composed ops.
struct RopeFunction : public torch::autograd::Function<RopeFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, int64_t start,
                               double base) {
    ctx->saved_data["start"] = start;
    ctx->saved_data["base"] = base;
    return rope_native(x, rope_table(start, x.size(2), x.size(3), base, x.scalar_type()), /*inverse=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& g = grads[0];
    const auto table = rope_table(ctx->saved_data["start"].toInt(), g.size(2), g.size(3),
                                  ctx->saved_data["base"].toDouble(), g.scalar_type());
    auto gx = torch::GradMode::is_enabled() || !rope_native_ok(g) ? rope_composed(g, table, -1.0)
                                                                  : rope_native(g, table, /*inverse=*/true);
    return {gx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rope_apply(const torch::Tensor& x, int64_t start, double base) {
  check_dim("rope_apply", "x", x, 4, "(B,H,T,D)");
  const int64_t T = x.size(2), D = x.size(3);
  MIXLAB_CHECK(D % 2 == 0, "rope_apply: head dim D must be even, got {}", D);
  MIXLAB_CHECK(start >= 0, "rope_apply: start must be >= 0, got {}", start);
  if (D == 0) return x.clone();
  if (!rope_native_ok(x)) return rope_composed(x, rope_table(start, T, D, base, x.scalar_type()));
  return RopeFunction::apply(x, start, base);
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
