// Private: argument checks shared by the affine kernels (mixlab/scan/affine.h). Every public
// function checks once here; the kernels below assume valid inputs.
#pragma once

#include <torch/torch.h>

#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab::detail {

struct AffineDims {
  int64_t B = 0, H = 0, T = 0, Dk = 0, Dv = 0;
};

/// q, k (B,H,T,Dk), v (B,H,T,Dv), same floating dtype, CPU; initial_state (B,H,Dk,Dv) if defined.
inline AffineDims affine_check_qkv(const char* fn, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& initial_state) {
  check_defined(fn, "q", q);
  check_dim(fn, "q", q, 4, "(B,H,T,Dk)");
  check_floating(fn, "q", q);
  check_cpu(fn, "q", q);
  AffineDims d{q.size(0), q.size(1), q.size(2), q.size(3), 0};
  check_defined(fn, "k", k);
  check_shape(fn, "k", k, {d.B, d.H, d.T, d.Dk}, "(B,H,T,Dk)");
  check_same_dtype(fn, "k", k, "q", q);
  check_cpu(fn, "k", k);
  check_defined(fn, "v", v);
  check_dim(fn, "v", v, 4, "(B,H,T,Dv)");
  check_shape(fn, "v", v, {d.B, d.H, d.T, -1}, "(B,H,T,Dv)");
  check_same_dtype(fn, "v", v, "q", q);
  check_cpu(fn, "v", v);
  d.Dv = v.size(3);
  // An empty head (Dk or Dv 0) has no state to carry: refused here for every path alike (the
  // composition's chunk padding failed on it with a LibTorch message; T = 0 stays allowed).
  MIXLAB_CHECK(d.Dk > 0 && d.Dv > 0, "{}: q, k must have Dk > 0 and v Dv > 0 (a head of width 0), got Dk = {}, Dv = {}",
               fn, d.Dk, d.Dv);
  if (initial_state.defined()) {
    check_shape(fn, "initial_state", initial_state, {d.B, d.H, d.Dk, d.Dv}, "(B,H,Dk,Dv)");
    check_same_dtype(fn, "initial_state", initial_state, "q", q);
    check_cpu(fn, "initial_state", initial_state);
  }
  return d;
}

/// Values of `t` must be finite and within [lo, hi]. Reads the values back: call it at a
/// boundary once per sequence, never per decode token (affine_step.h).
inline void affine_check_range(const char* fn, const char* name, const at::Tensor& t, double lo, double hi,
                               const char* meaning) {
  if (t.numel() == 0) return;
  // A broadcast dimension (stride 0, e.g. a scalar gate expanded over Dk) repeats its values:
  // read one slice of it. The expanded (B,H,T,Dk) gate took 0.3 ms here, 9 % of a T 4096 call.
  at::Tensor values = t.detach();
  for (int64_t dim = 0; dim < values.dim(); ++dim)
    if (values.stride(dim) == 0 && values.size(dim) > 1) values = values.narrow(dim, 0, 1);
  // One pass: aminmax propagates NaN and a +-inf lands outside [lo, hi], so both fail below.
  const auto [tmin, tmax] = torch::aminmax(values);
  const double mn = tmin.item<double>(), mx = tmax.item<double>();
  MIXLAB_CHECK(!std::isnan(mn) && !std::isnan(mx), "{}: {} ({}) must be finite", fn, name, meaning);
  MIXLAB_CHECK(std::isfinite(mn) && std::isfinite(mx), "{}: {} ({}) must be finite", fn, name, meaning);
  MIXLAB_CHECK(mn >= lo && mx <= hi, "{}: {} ({}) must lie in [{}, {}], got values in [{}, {}]", fn, name, meaning, lo,
               hi, mn, mx);
}

/// A per-token gate (B,H,T) or per-token-per-key gate (B,H,T,Dk) of the same dtype.
inline void affine_check_gate(const char* fn, const char* name, const at::Tensor& t, const std::vector<int64_t>& shape,
                              const char* letters, const at::Tensor& q) {
  check_defined(fn, name, t);
  check_shape(fn, name, t, shape, letters);
  check_same_dtype(fn, name, t, "q", q);
  check_cpu(fn, name, t);
}

/// The state a step starts from: (B,H,Dk,Dv) of q's dtype.
inline void affine_check_state(const char* fn, const at::Tensor& state, int64_t B, int64_t H, int64_t Dk, int64_t Dv,
                               const at::Tensor& q) {
  check_defined(fn, "state", state);
  check_shape(fn, "state", state, {B, H, Dk, Dv}, "(B,H,Dk,Dv)");
  check_same_dtype(fn, "state", state, "q_t", q);
  check_cpu(fn, "state", state);
}

/// The time axis of a chunked kernel: T tokens cut into n chunks of C, the last one padded with
/// zeros (each kernel says why a zero token leaves its state unchanged).
struct ChunkGrid {
  int64_t B = 0, H = 0, T = 0, C = 0, n = 0, pad = 0;
  ChunkGrid(const AffineDims& d, int64_t chunk)
      : B(d.B), H(d.H), T(d.T), C(chunk), n((d.T + chunk - 1) / chunk), pad(n * chunk - d.T) {}
  /// (B,H,T,D) -> (B,H,n,C,D), dense: layers pass permuted views and matmul wants contiguous.
  at::Tensor split(const at::Tensor& t, int64_t D) const {
    auto p = pad ? at::constant_pad_nd(t, {0, 0, 0, pad}) : t;
    return p.reshape({B, H, n, C, D}).contiguous();
  }
  /// (B,H,T) -> (B,H,n,C).
  at::Tensor split_scalars(const at::Tensor& t) const {
    auto p = pad ? at::constant_pad_nd(t, {0, pad}) : t;
    return p.reshape({B, H, n, C});
  }
  /// (B,H,n*C,D) -> (B,H,T,D): drops the padding.
  at::Tensor join(const at::Tensor& t, int64_t D) const { return t.reshape({B, H, n * C, D}).narrow(2, 0, T); }
};

}  // namespace mixlab::detail
