// The decode step's raw-row loops against the ATen ops they replace, in float and double, on
// sizes that leave vector remainders (1, 7, 64, 67, 256).
#include "mixlab/core/row_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

namespace row_kernels_test {

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
    // axpy, dot and softmax (large logits: the max must be subtracted first).
    auto ax = w.clone();
    mixlab::row::axpy<T>(static_cast<T>(0.75), x.data_ptr<T>(), ax.data_ptr<T>(), n);
    EXPECT_TRUE(torch::allclose(ax, w + 0.75 * x, rtol, atol));
    EXPECT_NEAR(static_cast<double>(mixlab::row::dot<T>(x.data_ptr<T>(), w.data_ptr<T>(), n)),
                at::dot(x, w).item<double>(), atol * n + rtol * at::dot(x.abs(), w.abs()).item<double>());
    auto sm = x * 40;
    mixlab::row::softmax<T>(sm.data_ptr<T>(), n);
    EXPECT_TRUE(torch::allclose(sm, at::softmax(x * 40, 0), rtol, atol));
    // Its exp series over the whole range: gaps down to -1000 (past the clamp), relative accuracy
    // where the probabilities are not tiny.
    auto wide = torch::rand({n}, opt) * -1000;
    auto expected = at::softmax(wide, 0);
    mixlab::row::softmax<T>(wide.data_ptr<T>(), n);
    EXPECT_TRUE(torch::allclose(wide, expected, rtol, atol));
    auto gaps = -torch::arange(n, opt) * (60.0 / n);  // exp(0) .. exp(-60): relative error
    expected = at::softmax(gaps, 0);
    mixlab::row::softmax<T>(gaps.data_ptr<T>(), n);
    EXPECT_TRUE(torch::allclose(gaps, expected, rtol, 0)) << (gaps / expected - 1).abs().max().item<double>();
    if (n > 1) {  // a NaN logit poisons the row, as in at::softmax
      auto poisoned = x.clone();
      poisoned[n / 2] = std::numeric_limits<T>::quiet_NaN();
      mixlab::row::softmax<T>(poisoned.data_ptr<T>(), n);
      EXPECT_TRUE(poisoned.isnan().all().item<bool>());
    }
    // combine: weighted rows, forwards and newest first (negative stride); 0 rows gives zeros,
    // row counts that leave remainders of its 4-row unrolling.
    for (int64_t rows : {0, 1, 3, 9, 33}) {
      auto A = torch::randn({rows, n}, opt), wr = torch::randn({rows}, opt);
      auto c = torch::full({n}, 7.0, opt);
      mixlab::row::combine<T>(wr.data_ptr<T>(), A.data_ptr<T>(), n, c.data_ptr<T>(), rows, n);
      EXPECT_TRUE(torch::allclose(c, at::mv(A.t(), wr), rtol, atol)) << "rows " << rows;
      if (rows == 0) continue;
      mixlab::row::combine<T>(wr.data_ptr<T>(), A.data_ptr<T>() + (rows - 1) * n, -n, c.data_ptr<T>(), rows, n);
      EXPECT_TRUE(torch::allclose(c, at::mv(A.flip({0}).t(), wr), rtol, atol)) << "rows " << rows;
    }
  }
}

TEST(RowKernels, RawRowsOkOnlyForContiguousCpuFloatRowsWithMatchingParams) {
  using mixlab::row::raw_rows_ok;
  auto x = torch::randn({2, 8}), w = torch::randn({8, 8}), wd = w.to(torch::kDouble), undefined = at::Tensor();
  EXPECT_TRUE(raw_rows_ok(x, {&w, &undefined}));
  EXPECT_TRUE(raw_rows_ok(x.to(torch::kDouble), {&wd}));
  EXPECT_FALSE(raw_rows_ok(x, {&wd}));  // mixed dtypes
  auto wt = w.t();
  EXPECT_FALSE(raw_rows_ok(x, {&wt}));                // non-contiguous parameter
  EXPECT_FALSE(raw_rows_ok(x.t(), {}));               // non-contiguous rows
  EXPECT_FALSE(raw_rows_ok(x.to(torch::kHalf), {}));  // not float or double
  EXPECT_FALSE(raw_rows_ok(x.unsqueeze(0), {}));      // dim 3 where 2 is asked
  EXPECT_TRUE(raw_rows_ok(x.unsqueeze(0), {}, 3));
}

TEST(RowKernels, ScalarActivationsMatchAten) {
  auto x = torch::linspace(-60, 60, 241, torch::kDouble);
  auto apply = [&](double (*f)(double)) {
    auto y = x.clone();
    for (int64_t i = 0; i < y.numel(); ++i) y.data_ptr<double>()[i] = f(y.data_ptr<double>()[i]);
    return y;
  };
  EXPECT_TRUE(torch::allclose(apply(mixlab::row::sigmoid<double>), torch::sigmoid(x), 1e-12, 1e-300));
  EXPECT_TRUE(torch::allclose(apply(mixlab::row::silu<double>), torch::silu(x), 1e-12, 1e-300));
  EXPECT_TRUE(torch::allclose(apply(mixlab::row::softplus<double>), torch::softplus(x), 1e-12, 1e-300));
  EXPECT_TRUE(torch::allclose(apply(mixlab::row::log_sigmoid<double>), torch::log_sigmoid(x), 1e-12, 1e-300));
}

TEST(RowKernels, MatchTheAtenOpsInFloat) { check_dtype<float>(torch::kFloat, 1e-5, 1e-5); }

TEST(RowKernels, MatchTheAtenOpsInDouble) { check_dtype<double>(torch::kDouble, 1e-12, 1e-12); }

}  // namespace

}  // namespace row_kernels_test
