// The Toeplitz op's native FFT path (toeplitz_fft.h): tables, the kernel spectrum, the parallel
// loop over (batch, head, lane group) running fft_conv_kernels.inc built for the instruction set
// mixlab/core/cpu_isa.h picks, and the autograd function.
//
// Why native: the composed path (torch::fft::rfft / irfft, a product, a narrow) runs pocketfft as
// LibTorch's CPU build ships it, 4 floats wide, and writes three (B,H,D,n) temporaries; it was at
// parity with the same code written in Python (docs/log/benchmarks-2026-11.md, "Against plain PyTorch"). Here
// one group's sequence stays in L1/L2 from the load of x to the store of y.
#include "toeplitz_fft.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <deque>
#include <mutex>
#include <vector>

#include "fft_conv_kernels.h"
#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/thread_scratch.h"

namespace mixlab::detail {

namespace {

namespace fc = fft_conv;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename E>
struct Kernels {
  void (*conv)(const fc::ConvRows<E>&);
  void (*conv_backward)(const fc::ConvGradRows<E>&);
};

template <typename E>
Kernels<E> kernels_for(CpuIsa isa) {
#define MIXLAB_FFT_CONV_KERNELS(ns) \
  Kernels<E> { fc::ns::conv, fc::ns::conv_backward }
  return MIXLAB_ISA_SELECT(isa, MIXLAB_FFT_CONV_KERNELS);
#undef MIXLAB_FFT_CONV_KERNELS
}

// Twiddles (2, n/2) (w^j = exp(-2 pi i j / n), re row then im row) and the bit-reversal
// permutation (n) of one FFT size and dtype, built in double once and kept: a training step asks
// for the same size in every layer.
struct FftTables {
  int64_t n;
  at::ScalarType dtype;
  torch::Tensor twiddles;
  torch::Tensor bit_reversal;
};

FftTables fft_tables(int64_t n, at::ScalarType dtype) {
  constexpr size_t kEntries = 16;
  static std::mutex mutex;
  static std::deque<FftTables> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& e : cache)
      if (e.n == n && e.dtype == dtype) return e;
  }
  // Built as ordinary tensors even under InferenceMode, so that a table first made while
  // decoding may later be saved for a backward.
  c10::InferenceMode off(false);
  torch::NoGradGuard no_grad;
  auto tw = torch::empty({2, std::max<int64_t>(n / 2, 1)}, torch::kDouble);
  auto tw_a = tw.accessor<double, 2>();
  for (int64_t j = 0; j < n / 2; ++j) {
    const double angle = -2.0 * M_PI * static_cast<double>(j) / static_cast<double>(n);
    tw_a[0][j] = std::cos(angle);
    tw_a[1][j] = std::sin(angle);
  }
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  auto rev = torch::empty({n}, torch::kLong);
  auto rev_a = rev.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = 0;
    for (int b = 0; b < bits; ++b)
      if (i & (int64_t{1} << b)) r |= int64_t{1} << (bits - 1 - b);
    rev_a[i] = r;
  }
  FftTables tables{n, dtype, tw.to(dtype).contiguous(), rev};
  std::lock_guard<std::mutex> lock(mutex);
  cache.push_front(tables);
  if (cache.size() > kEntries) cache.pop_back();
  return tables;
}

// The lags' spectrum K = FFT_n(t[:, :T] zero-padded), in bit-reversed order, as (H, 2, n):
// real parts then imaginary parts. H FFTs of one row each: small beside the B H D/2 of x.
torch::Tensor kernel_spectrum(const torch::Tensor& t, int64_t T, int64_t n, const FftTables& tables) {
  torch::NoGradGuard no_grad;
  auto k = torch::fft::fft(t.detach().narrow(1, 0, T), n, -1).index_select(1, tables.bit_reversal);
  return torch::view_as_real(k).permute({0, 2, 1}).contiguous().to(t.scalar_type());
}

int64_t lane_groups(int64_t D, int64_t lanes) { return ((D + 1) / 2 + lanes - 1) / lanes; }

template <typename E>
fc::Spectrum<E> spectrum_of(const FftTables& tables, const torch::Tensor& k, int64_t h, int64_t n) {
  const E* tw = tables.twiddles.data_ptr<E>();
  const int64_t tw_len = tables.twiddles.size(1);
  const E* kh = k.data_ptr<E>() + h * 2 * n;
  return {tw, tw + tw_len, kh, kh + n, n};
}

// x with unit column stride (any batch, head and row strides).
torch::Tensor unit_columns(const torch::Tensor& x) { return x.stride(3) == 1 ? x : x.contiguous(); }

template <typename E>
torch::Tensor forward_impl(const torch::Tensor& x_in, const torch::Tensor& bias, const torch::Tensor& k,
                           const FftTables& tables, int64_t n) {
  const auto x = unit_columns(x_in);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  constexpr int64_t W = fc::group_lanes<E>();
  const int64_t G = lane_groups(D, W);
  auto y = torch::empty({B, H, T, D}, x.options());
  const auto kernels = kernels_for<E>(cpu_isa());  // may throw: outside the parallel region
  const E* xp = x.data_ptr<E>();
  E* yp = y.data_ptr<E>();
  const auto bias_c = bias.defined() ? bias.narrow(1, 0, T).contiguous() : bias;
  const E* bp = bias_c.defined() ? bias_c.data_ptr<E>() : nullptr;
  at::parallel_for(0, B * H * G, 1, [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;  // kept between calls: fresh pages cost more than the transform
    E* work = scratch.get<E>(static_cast<size_t>(2 * n * W));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item % G, bh = item / G, b = bh / H, h = bh % H;
      fc::ConvRows<E> r{};
      r.x = xp + b * x.stride(0) + h * x.stride(1);
      r.x_row = x.stride(2);
      r.y = yp + (b * H + h) * T * D;
      r.y_row = D;
      r.bias = bp ? bp + h * T : nullptr;
      r.s = spectrum_of<E>(tables, k, h, n);
      r.work = work;
      r.T = T;
      r.D = D;
      r.group = g;
      kernels.conv(r);
    }
  });
  return y;
}

struct NativeGrads {
  torch::Tensor dx;     // (B,H,T,D) or undefined
  torch::Tensor cross;  // (B*H*G, 2, n): sum over lanes of conj(Zx) Zg, bit-reversed; or undefined
};

template <typename E>
NativeGrads backward_impl(const torch::Tensor& g_in, const torch::Tensor& x_in, const torch::Tensor& k,
                          const FftTables& tables, int64_t n, bool want_dx, bool want_cross) {
  const auto g = unit_columns(g_in);
  const auto x = unit_columns(x_in);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  constexpr int64_t W = fc::group_lanes<E>();
  const int64_t G = lane_groups(D, W);
  NativeGrads out;
  if (want_dx) out.dx = torch::empty({B, H, T, D}, x.options());
  if (want_cross) out.cross = torch::zeros({B * H * G, 2, n}, x.options());
  const auto kernels = kernels_for<E>(cpu_isa());
  const E* gp = g.data_ptr<E>();
  const E* xp = x.data_ptr<E>();
  E* dxp = want_dx ? out.dx.data_ptr<E>() : nullptr;
  E* cp = want_cross ? out.cross.data_ptr<E>() : nullptr;
  at::parallel_for(0, B * H * G, 1, [&](int64_t begin, int64_t end) {
    ThreadScratch scratch;  // kept between calls: fresh pages cost more than the transform
    E* work = scratch.get<E>(static_cast<size_t>(4 * n * W));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t gi = item % G, bh = item / G, b = bh / H, h = bh % H;
      fc::ConvGradRows<E> r{};
      r.g = gp + b * g.stride(0) + h * g.stride(1);
      r.g_row = g.stride(2);
      r.x = xp + b * x.stride(0) + h * x.stride(1);
      r.x_row = x.stride(2);
      r.dx = dxp ? dxp + (b * H + h) * T * D : nullptr;
      r.dx_row = D;
      r.p_re = cp ? cp + item * 2 * n : nullptr;
      r.p_im = cp ? cp + item * 2 * n + n : nullptr;
      r.s = spectrum_of<E>(tables, k, h, n);
      r.work = work;
      r.T = T;
      r.D = D;
      r.group = gi;
      kernels.conv_backward(r);
    }
  });
  return out;
}

// dL/dt[:, :T] from the per-item cross spectra: summed over batch and groups, put back in natural
// order, Re(IFFT) (the real part undoes the packing of two columns per lane), first T lags.
torch::Tensor lag_gradient(const torch::Tensor& cross, int64_t B, int64_t H, int64_t T, int64_t n,
                           const FftTables& tables) {
  auto p = cross.view({B, H, -1, 2, n}).sum(std::vector<int64_t>{0, 2});  // (H,2,n)
  auto pc = torch::view_as_complex(p.permute({0, 2, 1}).contiguous());    // (H,n) bit-reversed
  auto natural = pc.index_select(1, tables.bit_reversal);                 // (H,n)
  return torch::real(torch::fft::ifft(natural, n, -1)).narrow(1, 0, T);   // (H,T)
}

class ToeplitzFftFunction : public torch::autograd::Function<ToeplitzFftFunction> {
 public:
  // bias_in: the bias, or an empty tensor standing in for it when has_bias is false (an undefined tensor cannot
  // be an input of a custom function in LibTorch 1.13).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& t, const torch::Tensor& x,
                               const torch::Tensor& bias_in, bool has_bias, int64_t n) {
    const auto bias = has_bias ? bias_in : torch::Tensor();
    const auto tables = fft_tables(n, x.scalar_type());
    const int64_t T = x.size(2);
    auto k = kernel_spectrum(t, T, n, tables);
    torch::Tensor y;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "toeplitz_fft_native",
                               [&] { y = forward_impl<scalar_t>(x, bias, k, tables, n); });
    ctx->save_for_backward({x, k});
    ctx->saved_data["n"] = n;
    ctx->saved_data["Tmax"] = t.size(1);
    ctx->saved_data["has_bias"] = has_bias;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& k = saved[1];
    const int64_t n = ctx->saved_data["n"].toInt(), Tmax = ctx->saved_data["Tmax"].toInt();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const int64_t B = x.size(0), H = x.size(1), T = x.size(2);
    const auto& g = grads[0];
    const bool want_dt = ctx->needs_input_grad(0), want_dx = ctx->needs_input_grad(1);
    const bool want_db = has_bias && ctx->needs_input_grad(2);
    torch::Tensor dt, dx, db;
    if (!g.defined()) return {dt, dx, db, torch::Tensor(), torch::Tensor()};
    const auto tables = fft_tables(n, x.scalar_type());
    if (want_dt || want_dx) {
      NativeGrads ng;
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "toeplitz_fft_native_backward",
                                 [&] { ng = backward_impl<scalar_t>(g, x, k, tables, n, want_dx, want_dt); });
      dx = ng.dx;
      if (want_dt) {
        dt = torch::zeros({H, Tmax}, x.options());
        dt.narrow(1, 0, T).copy_(lag_gradient(ng.cross, B, H, T, n, tables));
      }
    }
    if (want_db) {
      db = torch::zeros({H, Tmax}, x.options());
      db.narrow(1, 0, T).copy_(g.sum(std::vector<int64_t>{0, 3}));
    }
    return {dt, dx, db, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor toeplitz_fft_native(const torch::Tensor& t, const torch::Tensor& x, const torch::Tensor& bias,
                                  int64_t n) {
  const auto bias_arg = bias.defined() ? bias : torch::empty({0}, x.options());
  return ToeplitzFftFunction::apply(t, x, bias_arg, bias.defined(), n)[0];
}

}  // namespace mixlab::detail
