#include "mixlab/core/split_heads.h"

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

std::vector<torch::Tensor> split_heads(const torch::Tensor& proj, int64_t n, int64_t H, int64_t D) {
  check_dim("split_heads", "proj", proj, 3, "(B,T,n*H*D)");
  MIXLAB_CHECK(n >= 1 && H >= 1 && D >= 1 && proj.size(2) == n * H * D,
               "split_heads: proj must have shape (B,T,n*H*D) with n*H*D = {}*{}*{} = {}, got {}", n, H, D, n * H * D,
               shape_string(proj));
  auto parts = proj.view({proj.size(0), proj.size(1), n, H, D}).unbind(2);  // n × (B,T,H,D)
  std::vector<torch::Tensor> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(p.permute({0, 2, 1, 3}));  // (B,H,T,D)
  return out;
}

}  // namespace mixlab
