// Causal Toeplitz mixing: boundary checks, FFT path, materialised path, loop reference.
#include "mixlab/toeplitz/toeplitz.h"

#include <ATen/Parallel.h>

#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "toeplitz_fft.h"

namespace mixlab {

namespace {

/// Sizes validated once at the boundary; the paths below assume them.
struct ToeplitzDims {
  int64_t B = 0, H = 0, T = 0, D = 0, Tmax = 0;
};

ToeplitzDims toeplitz_check(const char* fn, const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias) {
  check_defined(fn, "t", t);
  check_defined(fn, "x", x);
  check_cpu(fn, "t", t);
  check_cpu(fn, "x", x);
  check_dim(fn, "x", x, 4, "(B,H,T,D)");
  check_dim(fn, "t", t, 2, "(H,Tmax)");
  check_floating(fn, "x", x);
  check_same_dtype(fn, "t", t, "x", x);
  ToeplitzDims d;
  d.B = x.size(0);
  d.H = x.size(1);
  d.T = x.size(2);
  d.D = x.size(3);
  d.Tmax = t.size(1);
  MIXLAB_CHECK(d.T > 0, "{}: x must have T > 0 tokens (shape (B,H,T,D)), got {}", fn, shape_string(x));
  MIXLAB_CHECK(d.B > 0 && d.D > 0, "{}: x must have B > 0 and D > 0 (shape (B,H,T,D)), got {}", fn, shape_string(x));
  MIXLAB_CHECK(t.size(0) == d.H,
               "{}: t must have one lag vector per head: shape (H,Tmax) with H = {} (from x {}), got {}", fn, d.H,
               shape_string(x), shape_string(t));
  MIXLAB_CHECK(d.Tmax >= d.T, "{}: lag vector t (H,Tmax) = {} is shorter than the sequence T = {} of x {}", fn,
               shape_string(t), d.T, shape_string(x));
  if (bias.defined()) {
    check_cpu(fn, "bias", bias);
    check_same_dtype(fn, "bias", bias, "x", x);
    check_shape(fn, "bias", bias, {d.H, d.Tmax}, "(H,Tmax)");
  }
  return d;
}

torch::Tensor add_bias(torch::Tensor y, const torch::Tensor& bias, const ToeplitzDims& d) {
  if (!bias.defined()) return y;
  // bias[:, :T] as (1,H,T,1): one value per head and position, broadcast over batch and channels.
  return y + bias.narrow(1, 0, d.T).reshape({1, d.H, d.T, 1});
}

/// FFT path. Linear convolution of length T with lags t[:, :T] equals the first T entries of the
/// circular convolution of size n >= 2T - 1 of the zero-padded sequences; n = 2^k >= 2T.
torch::Tensor toeplitz_fft_composed(const torch::Tensor& t, const torch::Tensor& x, const ToeplitzDims& d) {
  const int64_t n = toeplitz_fft_size(d.T);
  // FFT along the last dimension: x (B,H,T,D) -> (B,H,D,T); rfft pads to n.
  auto xt = x.transpose(2, 3);
  auto xf = torch::fft::rfft(xt, n, -1);                     // (B,H,D,n/2+1) complex
  auto tf = torch::fft::rfft(t.narrow(1, 0, d.T), n, -1);    // (H,n/2+1) complex
  auto yf = xf * tf.unsqueeze(1).unsqueeze(0);               // (B,H,D,n/2+1)
  auto y = torch::fft::irfft(yf, n, -1).narrow(-1, 0, d.T);  // (B,H,D,T)
  return y.transpose(2, 3);                                  // (B,H,T,D), a view
}

/// Materialised path. u = [t_{T-1}, ..., t_0, 0 x (T-1)] (H, 2T-1); window w of u.unfold is
/// W[a][j] = u[a + j], and M[i][j] = t[i-j] (j <= i, else 0) = u[T-1-i+j] = W[T-1-i][j]. So
/// Y = M X = flip_T(W X): one matmul with the unfolded windows, then a flip of the output rows.
torch::Tensor toeplitz_materialized(const torch::Tensor& t, const torch::Tensor& x, const ToeplitzDims& d) {
  auto lags = t.narrow(1, 0, d.T).flip({1});                                  // (H,T): t_{T-1} .. t_0
  auto u = torch::cat({lags, torch::zeros({d.H, d.T - 1}, t.options())}, 1);  // (H,2T-1)
  auto w = u.unfold(1, d.T, 1);                                               // (H,T,T) view, W[a][j]
  auto wx = torch::matmul(w.unsqueeze(0), x);                                 // (B,H,T,D)
  return wx.flip({2});
}

template <typename scalar_t>
void reference_forward_kernel(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias,
                              torch::Tensor& y, const ToeplitzDims& d) {
  auto ta = t.accessor<scalar_t, 2>();
  auto xa = x.accessor<scalar_t, 4>();
  auto ya = y.accessor<scalar_t, 4>();
  const bool has_bias = bias.defined();
  const scalar_t* bias_data = has_bias ? bias.data_ptr<scalar_t>() : nullptr;  // (H,Tmax) contiguous
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(d.D);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.H, h = bh % d.H;
      for (int64_t i = 0; i < d.T; ++i) {
        const double bi = has_bias ? static_cast<double>(bias_data[h * d.Tmax + i]) : 0.0;
        for (int64_t c = 0; c < d.D; ++c) acc[c] = bi;
        for (int64_t j = 0; j <= i; ++j) {
          const double w = ta[h][i - j];
          for (int64_t c = 0; c < d.D; ++c) acc[c] += w * static_cast<double>(xa[b][h][j][c]);
        }
        for (int64_t c = 0; c < d.D; ++c) ya[b][h][i][c] = static_cast<scalar_t>(acc[c]);
      }
    }
  });
}

template <typename scalar_t>
void reference_backward_kernel(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& g,
                               ToeplitzGrads& out, bool has_bias, const ToeplitzDims& d) {
  auto ta = t.accessor<scalar_t, 2>();
  auto xa = x.accessor<scalar_t, 4>();
  auto ga = g.accessor<scalar_t, 4>();
  auto dxa = out.dx.accessor<scalar_t, 4>();
  // dt and dbias reduce over the batch: accumulate per head (heads are independent slices).
  auto dta = out.dt.accessor<scalar_t, 2>();
  at::parallel_for(0, d.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      for (int64_t k = 0; k < d.T; ++k) {
        // dt[h,k] = sum_{b,i>=k,c} g[b,h,i,c] x[b,h,i-k,c]
        double acc = 0.0;
        for (int64_t b = 0; b < d.B; ++b)
          for (int64_t i = k; i < d.T; ++i)
            for (int64_t c = 0; c < d.D; ++c) acc += static_cast<double>(ga[b][h][i][c]) * xa[b][h][i - k][c];
        dta[h][k] = static_cast<scalar_t>(acc);
      }
      for (int64_t b = 0; b < d.B; ++b)
        for (int64_t j = 0; j < d.T; ++j)
          for (int64_t c = 0; c < d.D; ++c) {
            // dx[b,h,j,c] = sum_{i>=j} t[h,i-j] g[b,h,i,c]
            double acc = 0.0;
            for (int64_t i = j; i < d.T; ++i) acc += static_cast<double>(ta[h][i - j]) * ga[b][h][i][c];
            dxa[b][h][j][c] = static_cast<scalar_t>(acc);
          }
      if (has_bias) {
        auto dba = out.dbias.accessor<scalar_t, 2>();
        for (int64_t i = 0; i < d.T; ++i) {
          double acc = 0.0;
          for (int64_t b = 0; b < d.B; ++b)
            for (int64_t c = 0; c < d.D; ++c) acc += ga[b][h][i][c];
          dba[h][i] = static_cast<scalar_t>(acc);
        }
      }
    }
  });
}

}  // namespace

const char* toeplitz_path_name(ToeplitzPath path) {
  switch (path) {
    case ToeplitzPath::kAuto:
      return "auto";
    case ToeplitzPath::kFft:
      return "fft";
    case ToeplitzPath::kMaterialized:
      return "materialized";
  }
  MIXLAB_ASSERT(false, "unknown ToeplitzPath {}", static_cast<int>(path));
  return "";
}

ToeplitzPath toeplitz_path_resolve(ToeplitzPath path, int64_t T) {
  if (path != ToeplitzPath::kAuto) return path;
  return T < kToeplitzFftCrossoverT ? ToeplitzPath::kMaterialized : ToeplitzPath::kFft;
}

int64_t toeplitz_fft_size(int64_t T) {
  int64_t n = 1;
  while (n < 2 * T) n <<= 1;
  return n;
}

torch::Tensor toeplitz_forward(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias,
                               ToeplitzPath path) {
  const auto d = toeplitz_check("toeplitz_forward", t, x, bias);
  torch::Tensor y;
  switch (toeplitz_path_resolve(path, d.T)) {
    case ToeplitzPath::kFft:
      if (!ComposedToeplitzFftGuard::active()) return detail::toeplitz_fft_native(t, x, bias, toeplitz_fft_size(d.T));
      y = toeplitz_fft_composed(t, x, d);
      break;
    case ToeplitzPath::kMaterialized:
      y = toeplitz_materialized(t, x, d);
      break;
    case ToeplitzPath::kAuto:
      MIXLAB_ASSERT(false, "kAuto must resolve to a concrete path");
      break;
  }
  return add_bias(y, bias, d);
}

torch::Tensor toeplitz_reference_forward(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias) {
  const auto d = toeplitz_check("toeplitz_reference_forward", t, x, bias);
  torch::NoGradGuard no_grad;
  auto tc = t.contiguous();
  auto xc = x.contiguous();
  auto bc = bias.defined() ? bias.contiguous() : bias;
  auto y = torch::empty({d.B, d.H, d.T, d.D}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "toeplitz_reference_forward",
                             [&] { reference_forward_kernel<scalar_t>(tc, xc, bc, y, d); });
  return y;
}

ToeplitzGrads toeplitz_reference_backward(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias,
                                          const torch::Tensor& grad_y) {
  const char* fn = "toeplitz_reference_backward";
  const auto d = toeplitz_check(fn, t, x, bias);
  check_defined(fn, "grad_y", grad_y);
  check_same_dtype(fn, "grad_y", grad_y, "x", x);
  check_shape(fn, "grad_y", grad_y, {d.B, d.H, d.T, d.D}, "(B,H,T,D)");
  torch::NoGradGuard no_grad;
  ToeplitzGrads out;
  out.dt = torch::zeros({d.H, d.Tmax}, x.options());
  out.dx = torch::zeros({d.B, d.H, d.T, d.D}, x.options());
  if (bias.defined()) out.dbias = torch::zeros({d.H, d.Tmax}, x.options());
  auto tc = t.contiguous();
  auto xc = x.contiguous();
  auto gc = grad_y.contiguous();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "toeplitz_reference_backward",
                             [&] { reference_backward_kernel<scalar_t>(tc, xc, gc, out, bias.defined(), d); });
  return out;
}

}  // namespace mixlab
