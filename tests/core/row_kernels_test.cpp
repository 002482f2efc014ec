// The decode step's raw-row loops against the ATen ops they replace, in float and double, on
// sizes that leave vector remainders (1, 7, 64, 67, 256).
#include "mixlab/core/row_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

template <typename T>
void check_dtype(torch::ScalarType dtype, double rtol, double atol) {
  torch::manual_seed(3);
  for (int64_t n : {1, 7, 64, 67, 256}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto opt = torch::TensorOptions().dtype(dtype);
    auto x = torch::randn({n}, opt) * 3 + 0.5, w = torch::randn({n}, opt), b = torch::randn({n}, opt);
    // LayerNorm, with and without affine parameters, and in place.
    auto y = torch::empty_like(x);
    mixlab::row::layer_norm<T>(x.data_ptr<T>(), y.data_ptr<T>(), w.data_ptr<T>(), b.data_ptr<T>(), n, 1e-5);
    EXPECT_TRUE(torch::allclose(y, at::layer_norm(x, {n}, w, b, 1e-5), rtol, atol));
    auto z = x.clone();
    mixlab::row::layer_norm<T>(z.data_ptr<T>(), z.data_ptr<T>(), nullptr, nullptr, n, 1e-5);
    EXPECT_TRUE(torch::allclose(z, at::layer_norm(x, {n}, {}, {}, 1e-5), rtol, atol));
    // Linear: (out, in) weights, with and without bias.
    for (int64_t out : {1, 5, 64}) {
      auto W = torch::randn({out, n}, opt), bias = torch::randn({out}, opt);
      auto r = torch::empty({out}, opt);
      mixlab::row::linear<T>(W.data_ptr<T>(), bias.data_ptr<T>(), x.data_ptr<T>(), r.data_ptr<T>(), out, n);
      EXPECT_TRUE(torch::allclose(r, at::addmv(bias, W, x), rtol, atol)) << "out " << out;
      mixlab::row::linear<T>(W.data_ptr<T>(), nullptr, x.data_ptr<T>(), r.data_ptr<T>(), out, n);
      EXPECT_TRUE(torch::allclose(r, at::mv(W, x), rtol, atol)) << "out " << out;
    }
    // GELU (erf form) and the residual add.
    auto g = x.clone();
    mixlab::row::gelu<T>(g.data_ptr<T>(), n);
    EXPECT_TRUE(torch::allclose(g, at::gelu(x), rtol, atol));
    auto acc = w.clone();
    mixlab::row::add<T>(x.data_ptr<T>(), acc.data_ptr<T>(), n);
    EXPECT_TRUE(torch::equal(acc, w + x));
  }
}

TEST(RowKernels, MatchTheAtenOpsInFloat) { check_dtype<float>(torch::kFloat, 1e-5, 1e-5); }

TEST(RowKernels, MatchTheAtenOpsInDouble) { check_dtype<double>(torch::kDouble, 1e-12, 1e-12); }

}  // namespace
