// Private: what an affine member's file implements (src/scan/affine_member_<name>.cpp), and the
// helpers those files share.
//
// AffineMixer (mixlab/scan/affine_mixer.h) owns what every member has: the q/k/v/o projections,
// the kernel of its row (diag decay or delta rule) in its four forms, the state, and the decode
// paths (ATen and raw rows). A member's file owns the rest, in one place:
//   - its AffineMemberDef, which its row of the member table (kMembers, affine_mixer.cpp) points
//     at: the file's member name, Dk, and build(), which registers the member's parameters and
//     returns its AffineMemberImpl;
//   - the AffineMemberImpl: the parameters' handles, prepare() and finish() on ATen tensors
//     (training forward, prefill, the ATen decode step), and the raw-row hooks of the decode
//     step (AffineMixer::step_rows_typed, float and double) that compute the same formulas in
//     the same float operation order.
// A new member is one such file plus one row in kMembers (and its AffineMember value and doc
// block in affine_mixer.h, its extern declaration below, its expected parameters in
// tests/scan/affine_member_test.cpp).
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>

#include "mixlab/core/row_kernels.h"
#include "mixlab/scan/affine_mixer.h"

namespace mixlab::detail::affine_member {

/// One mixer's sizes: C model width, H heads, Dk key (state) rows and Dv value columns per head.
struct AffineSizes {
  int64_t C, H, dk, dv;
};

/// Kernel inputs for a (B,T,C) input, all (B,H,T,.), and what finish() needs.
struct AffinePrepared {
  torch::Tensor q, k, v, g, beta, log_alpha;  // g: diag decay's log decay; beta, log_alpha: delta rule
  torch::Tensor gate, skip;                   // output gate (B,T,H,Dv) and skip input (B,T,H,Dv), when used
};

/// What AffineMixer::prepare hands a member: the shared projections of x, from one Linear each
/// (training, prefill) or narrowed from the decode step's single fused matmul.
struct AffineProjected {
  const torch::Tensor& x;  // (B,T,C)
  torch::Tensor q, k, v;   // (B,H,T,Dk), (B,H,T,Dk), (B,H,T,Dv)
  int64_t B, T;
  double scale;  // 1/sqrt(Dk)
  /// gate_proj's output (B,T,H*Dv), the same way; members with a gate_proj only. A call, not a
  /// tensor: the member runs it where its formulas need it, so the ops (and autograd's order of
  /// accumulating x's gradient) come in the member's order.
  std::function<torch::Tensor()> gate;
};

/// The raw-row decode step's view of one batch row and one head (AffineMixer::step_rows_typed).
/// The hooks rewrite the head's rows in place; the mixer runs the kernel between them.
template <typename T>
struct AffineRowHead {
  // The batch row, set before begin_row: the member's projections out of the stacked input matmul
  // (null where the member has none) and a scratch row.
  const T* gate_row = nullptr;   // (H*Dv) gate_proj's output
  const T* decay_row = nullptr;  // decay_proj's output
  const T* aux_row = nullptr;    // aux_proj's output
  T* row_scratch = nullptr;      // (H*Dk) free for begin_row (GLA: every key's log decay)
  T scale = T(1);                // 1/sqrt(Dk)
  // The head, set before prepare_head.
  int64_t h = 0;
  T* q = nullptr;        // (Dk) the projected query, to turn into the kernel's q
  T* k = nullptr;        // (Dk) key
  T* v = nullptr;        // (Dv') value, with the normaliser's 1 at [Dv] when the row has one
  T* decay = nullptr;    // (Dk) diag decay kernel: prepare_head writes exp(g) per key
  T* scratch = nullptr;  // (Dk) free
  T alpha = T(1);        // delta rule kernel: prepare_head sets alpha (decay) and beta
  T beta = T(0);
  // finish_head: the kernel's o = S'^T q (Dv') into this head's output y (Dv).
  const T* o = nullptr;
  T* y = nullptr;
};

/// One member's parameters and formulas in one mixer. build() (AffineMemberDef) registers the
/// parameters on the mixer and keeps their handles here.
class AffineMemberImpl {
 public:
  explicit AffineMemberImpl(const AffineSizes& s) : sizes(s) {}
  virtual ~AffineMemberImpl() = default;

  const AffineSizes sizes;
  // The member's input projections that join the decode step's stacked matmul after q, k, v, in
  // this order: gate_proj (H*Dv outputs: the output gate, also in the fused ATen matmul),
  // decay_proj and aux_proj (any width). Null where the member has none.
  torch::nn::Linear gate_proj{nullptr}, decay_proj{nullptr}, aux_proj{nullptr};

  /// The kernel's inputs (q, k, v and g, or beta and log_alpha) and finish's (gate, skip).
  virtual AffinePrepared prepare(const AffineProjected& in) = 0;
  /// y (B,T,H,Dv'), the kernel's output heads last -> (B,T,H,Dv), before o_proj.
  virtual torch::Tensor finish(const AffinePrepared& p, const torch::Tensor& y) = 0;

  // Raw rows, per dtype (AffineMemberRows implements them from one template per hook):
  /// Once per batch row, before its heads.
  virtual void begin_row(AffineRowHead<float>& r) = 0;
  virtual void begin_row(AffineRowHead<double>& r) = 0;
  /// Per head, before the kernel: prepare()'s formulas on this head's q, k, v.
  virtual void prepare_head(AffineRowHead<float>& r) = 0;
  virtual void prepare_head(AffineRowHead<double>& r) = 0;
  /// Per head, after the kernel: finish()'s formulas, o -> y.
  virtual void finish_head(AffineRowHead<float>& r) = 0;
  virtual void finish_head(AffineRowHead<double>& r) = 0;
};

/// Base of a member's class: turns its templates begin_row_t<T> (optional), prepare_head_t<T> and
/// finish_head_t<T> into the float and double hooks.
template <class Member>
class AffineMemberRows : public AffineMemberImpl {
 public:
  using AffineMemberImpl::AffineMemberImpl;
  void begin_row(AffineRowHead<float>& r) final { self().template begin_row_t<float>(r); }
  void begin_row(AffineRowHead<double>& r) final { self().template begin_row_t<double>(r); }
  void prepare_head(AffineRowHead<float>& r) final { self().template prepare_head_t<float>(r); }
  void prepare_head(AffineRowHead<double>& r) final { self().template prepare_head_t<double>(r); }
  void finish_head(AffineRowHead<float>& r) final { self().template finish_head_t<float>(r); }
  void finish_head(AffineRowHead<double>& r) final { self().template finish_head_t<double>(r); }

  /// Default: nothing per batch row.
  template <typename T>
  void begin_row_t(AffineRowHead<T>&) {}

 private:
  Member& self() { return static_cast<Member&>(*this); }
};

/// A member file's entry in the member table (AffineMemberInfo::impl).
struct AffineMemberDef {
  const char* name;  // the file's member: its spec name, equal to its row's name
  const char* file;  // __FILE__ of src/scan/affine_member_<name>.cpp
  int64_t state_dk;  // Dk per head; 0: Dk = Dv
  /// Registers the member's parameters and buffers on `mixer` (after q/k/v/o, in a fixed order:
  /// checkpoints and the RNG draws of the init depend on it) and returns their handles and code.
  /// Called with grad mode off.
  std::unique_ptr<AffineMemberImpl> (*build)(torch::nn::Module& mixer, const AffineSizes& sizes);
};

// One per file, src/scan/affine_member_<name>.cpp.
extern const AffineMemberDef kAffineMemberLinearAttn, kAffineMemberRetNet, kAffineMemberGla, kAffineMemberMamba,
    kAffineMemberMlstm, kAffineMemberGatedRfa, kAffineMemberDeltaNet, kAffineMemberGatedDeltaNet;

// Shared by the member files: ATen.

/// Registers a Linear (in -> out) named `name` on `mixer`.
inline torch::nn::Linear affine_linear(torch::nn::Module& mixer, const char* name, int64_t in, int64_t out, bool bias) {
  return mixer.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
}
/// The Δ bias of mamba and gated DeltaNet as their authors initialise it (mamba's Mamba2 and fla's
/// GatedDeltaNet): softplus(dt_bias) = dt, one per head, log-uniform in [1e-3, 1e-1], floored at
/// 1e-4. One torch::rand draw of H values.
inline torch::Tensor mamba_dt_bias_init(int64_t H) {
  const auto dt = torch::exp(torch::rand({H}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3)).clamp_min(1e-4);
  return dt + torch::log(-torch::expm1(-dt));  // softplus^-1(dt)
}

/// (B,T,H*D) -> (B,H,T,D)
inline torch::Tensor heads_first(const torch::Tensor& t, int64_t H) {
  return t.reshape({t.size(0), t.size(1), H, -1}).permute({0, 2, 1, 3});
}
/// (B,T,H) -> (B,H,T)
inline torch::Tensor per_head(const torch::Tensor& t) { return t.permute({0, 2, 1}); }
/// (B,H,T) -> (B,H,T,Dk), one value for every key.
inline torch::Tensor expand_keys(const torch::Tensor& t, int64_t dk) {
  return t.unsqueeze(-1).expand({t.size(0), t.size(1), t.size(2), dk});
}
inline torch::Tensor l2_normalise(const torch::Tensor& t) { return t / t.pow(2).sum(-1, true).add(1e-6).sqrt(); }
/// Over the last dim, no affine.
inline torch::Tensor rms_norm(const torch::Tensor& t) { return t * torch::rsqrt(t.pow(2).mean(-1, true) + 1e-6); }
/// v with an extra ones column: the normaliser's (Dv' = Dv + 1).
inline torch::Tensor with_ones_column(const torch::Tensor& v) {
  return torch::cat({v, torch::ones_like(v.narrow(-1, 0, 1))}, -1);
}
/// y (.., Dv+1) -> y[..Dv] / (y[Dv] + 1e-6): linear attention's normaliser (linear_attn, gated_rfa).
inline torch::Tensor normalised(const torch::Tensor& y, int64_t dv) {
  return y.narrow(-1, 0, dv) / (y.narrow(-1, dv, 1) + 1e-6);
}
/// The delta rule's features: q = l2(silu(q)) / sqrt(Dk), k = l2(silu(k)) (deltanet, gated_deltanet).
inline void delta_rule_features(const AffineProjected& in, AffinePrepared& p) {
  p.q = l2_normalise(torch::silu(in.q)) * in.scale;
  p.k = l2_normalise(torch::silu(in.k));
}

// Shared by the member files: raw rows, the same formulas as their ATen forms above.

template <typename T>
T elu_plus_one(T x) {
  return x > T(0) ? x + T(1) : std::exp(x);
}
/// x / sqrt(sum x^2 + 1e-6), as l2_normalise.
template <typename T>
void l2_normalise(T* x, int64_t n) {
  const T inv = T(1) / std::sqrt(row::dot(x, x, n) + T(1e-6));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}
/// x * rsqrt(mean x^2 + 1e-6), as rms_norm.
template <typename T>
void rms_norm(T* x, int64_t n) {
  const T inv = T(1) / std::sqrt(row::dot(x, x, n) / T(n) + T(1e-6));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}
/// y = o[..Dv] / (o[Dv] + 1e-6), as normalised.
template <typename T>
void normalised_head(const AffineRowHead<T>& r, int64_t dv) {
  const T z = r.o[dv] + T(1e-6);
  for (int64_t j = 0; j < dv; ++j) r.y[j] = r.o[j] / z;
}
/// y = rms_norm(o), times silu(gate) when the member has a gate (retnet, gla, gated_deltanet; not
/// deltanet).
template <typename T>
void rms_norm_head(const AffineRowHead<T>& r, int64_t dv) {
  std::copy(r.o, r.o + dv, r.y);
  rms_norm(r.y, dv);
  if (r.gate_row) {
    const T* gate = r.gate_row + r.h * dv;
    for (int64_t j = 0; j < dv; ++j) r.y[j] *= row::silu(gate[j]);
  }
}
/// As delta_rule_features, on one head's q and k.
template <typename T>
void delta_rule_features_head(AffineRowHead<T>& r, int64_t dk) {
  for (int64_t i = 0; i < dk; ++i) {
    r.q[i] = row::silu(r.q[i]);
    r.k[i] = row::silu(r.k[i]);
  }
  l2_normalise(r.q, dk);
  l2_normalise(r.k, dk);
  for (int64_t i = 0; i < dk; ++i) r.q[i] *= r.scale;
}

}  // namespace mixlab::detail::affine_member
