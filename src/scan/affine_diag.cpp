// Diagonal-decay affine recurrence S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, in
// its chunked, recurrent, scan and reference forms, and the affine aggregator of Lemma 3.4.
// See mixlab/scan/affine.h for shapes and the stability argument of the chunked form.
#include <limits>
#include <vector>

#include "affine_checks.h"
#include "affine_forms.h"
#include "affine_fused.h"
#include "affine_step.h"
#include "mixlab/scan/affine.h"

namespace mixlab {
namespace {

detail::AffineDims diag_check(const char* fn, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& g, const at::Tensor& initial_state) {
  auto d = detail::affine_check_qkv(fn, q, k, v, initial_state);
  detail::affine_check_gate(fn, "g", g, {d.B, d.H, d.T, d.Dk}, "(B,H,T,Dk)", q);
  detail::affine_check_range(fn, "g", g, -1e30, 0.0, "log decay, decay = exp(g) in (0,1]");
  return d;
}

}  // namespace

// Unchecked step: the decode kernel the recurrent form loops over.
AffineStep detail::diag_decay_step_unchecked(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t,
                                             const at::Tensor& v_t, const at::Tensor& g_t) {
  auto next = g_t.exp().unsqueeze(-1) * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);  // (B,H,Dk,Dv)
  auto out = torch::matmul(q_t.unsqueeze(-2), next).squeeze(-2);                        // (B,H,Dv)
  return {out, next};
}

// ---- affine aggregator --------------------------------------------------------------------
AffineElement affine_combine(const AffineElement& earlier, const AffineElement& later) {
  if (!earlier.dense && !later.dense) {
    return {later.e * earlier.e, later.f + later.e.unsqueeze(-1) * earlier.f, false};
  }
  auto dense = [](const AffineElement& x) { return x.dense ? x.e : torch::diag_embed(x.e); };
  auto e2 = dense(later);
  return {torch::matmul(e2, dense(earlier)), later.f + torch::matmul(e2, earlier.f), true};
}

AffineElement affine_identity(const AffineElement& like) {
  if (!like.dense) return {torch::ones_like(like.e), torch::zeros_like(like.f), false};
  auto eye = torch::eye(like.e.size(-1), like.e.options()).expand_as(like.e).clone();
  return {eye, torch::zeros_like(like.f), true};
}

at::Tensor affine_apply(const AffineElement& element, const at::Tensor& state) {
  return element.dense ? torch::matmul(element.e, state) : element.e.unsqueeze(-1) * state;
}

// ---- chunked --------------------------------------------------------------------------------
// The per-key path forms exp(-b) directly when no chunk decays by more than e^-kOneLevelMaxLogDecay
// (float32 range is about e^±87; 60 leaves room for |q|, |k| far from 1).
constexpr double kOneLevelMaxLogDecay = 60.0;

AffineResult diag_decay_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                const at::Tensor& initial_state, int64_t chunk) {
  constexpr const char* fn = "diag_decay_chunked";
  const auto d = diag_check(fn, q, k, v, g, initial_state);
  MIXLAB_CHECK(chunk >= 1 && (chunk & (chunk - 1)) == 0, "{}: chunk must be a power of two >= 1, got {}", fn, chunk);
  if (auto fused = detail::diag_decay_fused(d, q, k, v, g, initial_state)) return *fused;
  const int64_t B = d.B, H = d.H, T = d.T, Dk = d.Dk, Dv = d.Dv, C = chunk;
  at::Tensor state = detail::affine_initial_or_zeros(initial_state, d, q);
  if (T == 0) return {torch::zeros({B, H, 0, Dv}, q.options()), state};
  const detail::ChunkGrid grid(d, C);
  const int64_t n = grid.n;
  // Padding tokens have k = v = 0 and g = 0: they neither write nor decay the state.
  auto chunks = [&](const at::Tensor& t, int64_t D) { return grid.split(t, D); };
  auto qc = chunks(q, Dk), kc = chunks(k, Dk), vc = chunks(v, Dv);  // (B,H,n,C,D)
  // Log decays in float64 (ATen's acc_type idea): every decay factor below is exp(b_t - b_j), a
  // difference of two cumulative sums from the chunk start. In float32 the sums reach |b| ~ C|g|
  // under strong decay and the difference cancels to an absolute error ~ eps_f |b|, so the
  // chunked output lost accuracy in proportion to the chunk (issue 10: 4e-6 at chunk 8, 2.7e-5 at
  // 64, against 1e-7 for the recurrent form). With the sums and differences in double, the one
  // rounding left is of the factor itself (error <= eps_f relative), independent of C and |g|.
  const auto real = q.scalar_type();
  auto to_real = [&](const at::Tensor& t) { return t.to(real); };
  // A decay that is one scalar per (b,h,t) passed EXPANDED over Dk (stride 0: RetNet, mLSTM,
  // gated RFA, linear attention) takes the cheaper path: one (C,C) decay matrix per chunk instead
  // of the per-key factorisation. Only the stride tells: a materialised g with equal entries is a
  // different function of its Dk entries (its gradient is per key), so it takes the general path.
  const bool scalar_gate = Dk == 1 || g.stride(3) == 0;
  at::Tensor o, b_q, b_k, carry;  // b_q: exp(b_t) for q (B,H,n,C,Dk|1); b_k: exp(b_C - b_j)
  if (scalar_gate) {
    auto b = chunks(g.narrow(3, 0, 1), 1).squeeze(-1).to(torch::kDouble).cumsum(3);  // (B,H,n,C) log decay
    auto diff = b.unsqueeze(-1) - b.unsqueeze(-2);                                   // b_t - b_j (B,H,n,C,C)
    auto future = torch::ones({C, C}, q.options().dtype(torch::kBool)).triu(1);
    auto decay = to_real(diff.masked_fill(future, -std::numeric_limits<double>::infinity()).exp());  // 0 above diag
    o = torch::matmul(torch::matmul(qc, kc.transpose(-1, -2)) * decay, vc);
    auto bC = b.narrow(3, C - 1, 1);  // (B,H,n,1)
    b_q = to_real(b.exp().unsqueeze(-1));
    b_k = to_real((bC - b).exp().unsqueeze(-1));
    carry = to_real(bC.exp().unsqueeze(-1));                       // (B,H,n,1,1)
  } else if (auto b = chunks(g, Dk).to(torch::kDouble).cumsum(3);  // log decay from chunk start, <= 0
             b.min().item<double>() >= -kOneLevelMaxLogDecay) {
    // Every chunk decays by at most e^-60: one level, A = (q exp(b)) (k exp(-b))^T masked, as
    // the GLA paper's first level. Each factor is one rounding of a double exponent (relative
    // error eps_f), and with |b| <= 60 neither exp(b) underflows nor exp(-b) overflows float32,
    // so every product q_i k_j exp(b_i - b_j) keeps float32's relative accuracy. Measured:
    // 2-3x faster than the halving levels below (bench/baselines/run.py, gla).
    // One exp pass over b: exp(-b) = 1 / exp(b) and exp(b_C - b) = exp(b_C) exp(-b), in double.
    auto eb = b.exp(), emb = eb.reciprocal();
    auto ebC = eb.select(3, C - 1).unsqueeze(3);  // (B,H,n,1,Dk)
    b_q = to_real(eb);
    b_k = to_real(emb * ebC);
    carry = to_real(ebC.transpose(-1, -2));  // (B,H,n,Dk,1)
    o = torch::matmul(torch::matmul(qc * b_q, (kc * to_real(emb)).transpose(-1, -2)).tril_(), vc);
  } else {
    // Stronger decays: the pairwise factorisation below never forms exp(-b).
    // Intra-chunk: diagonal term, then each level of halving pairs a left half L with a right
    // half R; A_RL = (q_R exp(b_R - b_m)) (k_L exp(b_m - b_L))^T with b_m the log decay at the
    // end of L. Exponents are <= 0 on both sides.
    o = (qc * kc).sum(-1, true) * vc;  // (B,H,n,C,Dv)
    for (int64_t h = C / 2; h >= 1; h /= 2) {
      const int64_t nb = C / (2 * h);
      auto split = [&](const at::Tensor& t, int64_t D) { return t.reshape({B, H, n, nb, 2, h, D}); };
      auto qs = split(qc, Dk), ks = split(kc, Dk), vs = split(vc, Dv), bs = split(b, Dk);
      auto bL = bs.select(4, 0), bR = bs.select(4, 1);  // (B,H,n,nb,h,Dk)
      auto bm = bL.narrow(-2, h - 1, 1);
      auto qt = qs.select(4, 1) * to_real((bR - bm).exp());
      auto kt = ks.select(4, 0) * to_real((bm - bL).exp());
      // Small blocks: broadcast products instead of a batched matmul. LibTorch's CPU bmm runs
      // one gemm per batch entry (B H n nb of them, each of h x Dk x h), which costs far more than
      // the arithmetic for h <= 8; the temporaries are (B,H,n,nb,h,h,D), i.e. h/2 times q's size.
      at::Tensor oR;  // (B,H,n,nb,h,Dv)
      if (h <= 8) {
        auto a = (qt.unsqueeze(-2) * kt.unsqueeze(-3)).sum(-1);          // (..,h,h)
        oR = (a.unsqueeze(-1) * vs.select(4, 0).unsqueeze(-3)).sum(-2);  // (..,h,Dv)
      } else {
        oR = torch::matmul(torch::matmul(qt, kt.transpose(-1, -2)), vs.select(4, 0));
      }
      // Accumulate into the right halves in place (o is not saved by any backward).
      o.view({B, H, n, nb, 2, h, Dv}).select(4, 1).add_(oR);
    }
    auto bC = b.select(3, C - 1).unsqueeze(3);  // (B,H,n,1,Dk)
    b_q = to_real(b.exp());
    b_k = to_real((bC - b).exp());
    carry = to_real(bC.exp().transpose(-1, -2));  // (B,H,n,Dk,1)
  }

  // Inter-chunk: chunk c's contribution to the state at its end, then a sequential pass of
  // n diagonal-affine steps over (B,H,Dk,Dv) states.
  auto writes = torch::matmul((kc * b_k).transpose(-1, -2), vc);  // (B,H,n,Dk,Dv)
  // unbind, not select, in loops: select's backward materialises a full-size zero gradient per
  // call (O(n^2) over the loop), unbind's backward stacks the pieces once.
  const auto carries = carry.unbind(2), chunk_writes = writes.unbind(2);
  std::vector<at::Tensor> starts;
  starts.reserve(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    starts.push_back(state);
    state = carries[static_cast<size_t>(c)] * state + chunk_writes[static_cast<size_t>(c)];
  }
  o = o + torch::matmul(qc * b_q, torch::stack(starts, 2));
  return {grid.join(o, Dv), state};
}

// ---- recurrent ------------------------------------------------------------------------------
AffineStep diag_decay_step(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                           const at::Tensor& g_t) {
  constexpr const char* fn = "diag_decay_step";
  check_defined(fn, "q_t", q_t);
  check_dim(fn, "q_t", q_t, 3, "(B,H,Dk)");
  check_floating(fn, "q_t", q_t);
  const int64_t B = q_t.size(0), H = q_t.size(1), Dk = q_t.size(2);
  detail::affine_check_gate(fn, "k_t", k_t, {B, H, Dk}, "(B,H,Dk)", q_t);
  detail::affine_check_gate(fn, "g_t", g_t, {B, H, Dk}, "(B,H,Dk)", q_t);
  check_defined(fn, "v_t", v_t);
  check_dim(fn, "v_t", v_t, 3, "(B,H,Dv)");
  detail::affine_check_gate(fn, "v_t", v_t, {B, H, v_t.size(2)}, "(B,H,Dv)", q_t);
  detail::affine_check_state(fn, state, B, H, Dk, v_t.size(2), q_t);
  detail::affine_check_range(fn, "g_t", g_t, -1e30, 0.0, "log decay, decay = exp(g) in (0,1]");
  return detail::diag_decay_step_unchecked(state, q_t, k_t, v_t, g_t);
}

AffineResult diag_decay_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state) {
  const auto d = diag_check("diag_decay_recurrent", q, k, v, g, initial_state);
  if (auto fused = detail::diag_decay_fused(d, q, k, v, g, initial_state)) return *fused;
  const auto qs = q.unbind(2), ks = k.unbind(2), vs = v.unbind(2), gs = g.unbind(2);  // see the chunked loop
  return detail::affine_token_loop(d, q, detail::affine_initial_or_zeros(initial_state, d, q),
                                   [&](const at::Tensor& state, size_t t) {
                                     return detail::diag_decay_step_unchecked(state, qs[t], ks[t], vs[t], gs[t]);
                                   });
}

// ---- scan form ------------------------------------------------------------------------------
AffineResult diag_decay_scan_form(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state) {
  const auto d = diag_check("diag_decay_scan_form", q, k, v, g, initial_state);
  std::vector<AffineElement> elements;  // (E_t = exp(g_t) diagonal, f_t = k_t v_t^T)
  const auto qs = q.unbind(2), ks = k.unbind(2), vs = v.unbind(2), gs = g.unbind(2);
  for (size_t t = 0; t < qs.size(); ++t)
    elements.push_back({gs[t].exp(), ks[t].unsqueeze(-1) * vs[t].unsqueeze(-2), false});
  AffineElement identity{torch::ones({d.B, d.H, d.Dk}, q.options()), torch::zeros({d.B, d.H, d.Dk, d.Dv}, q.options()),
                         false};
  return detail::affine_scan_outputs(d, qs, detail::affine_initial_or_zeros(initial_state, d, q), elements, identity);
}

// ---- reference ------------------------------------------------------------------------------
AffineResult diag_decay_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& initial_state) {
  const auto d = diag_check("diag_decay_reference", q, k, v, g, initial_state);
  return detail::affine_reference_loop(
      d, q, detail::affine_initial_or_zeros(initial_state, d, q), [&](int64_t b, int64_t h, int64_t t) {
        // E_t = diag(exp(g_t)), f_t = k_t v_t^T
        return std::make_pair(torch::diag(g[b][h][t].exp()), torch::outer(k[b][h][t], v[b][h][t]));
      });
}

}  // namespace mixlab
