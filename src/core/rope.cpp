#include "mixlab/core/rope.h"

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

torch::Tensor rope_apply(const torch::Tensor& x, int64_t start, double base) {
  check_dim("rope_apply", "x", x, 4, "(B,H,T,D)");
  const int64_t T = x.size(2), D = x.size(3);
  MIXLAB_CHECK(D % 2 == 0, "rope_apply: head dim D must be even, got {}", D);
  MIXLAB_CHECK(start >= 0, "rope_apply: start must be >= 0, got {}", start);
  auto opts = x.options();
  // Angles in double, then cast: positions up to 2^24 keep full precision.
  auto pos = torch::arange(start, start + T, torch::dtype(torch::kDouble));
  auto inv = torch::pow(base, -torch::arange(0, D / 2, torch::dtype(torch::kDouble)) * 2.0 / D);
  auto ang = torch::outer(pos, inv);  // (T, D/2)
  auto cos = ang.cos().to(opts.dtype()), sin = ang.sin().to(opts.dtype());
  auto x1 = x.narrow(3, 0, D / 2), x2 = x.narrow(3, D / 2, D / 2);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, 3);
}

}  // namespace mixlab
