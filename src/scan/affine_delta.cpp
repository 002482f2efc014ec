// Delta-rule affine recurrence S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
// o_t = S_t^T q_t (DeltaNet when log_alpha is undefined, gated DeltaNet otherwise), in its
// chunked WY/UT form, recurrent, scan and reference forms. See mixlab/scan/affine.h.
#include <limits>
#include <vector>

#include "affine_checks.h"
#include "affine_forms.h"
#include "affine_fused.h"
#include "affine_step.h"
#include "mixlab/scan/affine.h"

namespace mixlab {
namespace {

constexpr double kBetaMax = 2.0;  // I - beta k k^T is non-expansive for ||k|| <= 1 iff beta in [0,2]

detail::AffineDims delta_check(const char* fn, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& beta, const at::Tensor& log_alpha, const at::Tensor& initial_state) {
  auto d = detail::affine_check_qkv(fn, q, k, v, initial_state);
  detail::affine_check_gate(fn, "beta", beta, {d.B, d.H, d.T}, "(B,H,T)", q);
  detail::affine_check_range(fn, "beta", beta, 0.0, kBetaMax, "delta-rule write strength");
  if (log_alpha.defined()) {
    detail::affine_check_gate(fn, "log_alpha", log_alpha, {d.B, d.H, d.T}, "(B,H,T)", q);
    detail::affine_check_range(fn, "log_alpha", log_alpha, -1e30, 0.0, "log decay, alpha = exp(log_alpha) in (0,1]");
  }
  return d;
}

}  // namespace

// The decode kernel the recurrent form loops over.
AffineStep detail::delta_rule_step_unchecked(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t,
                                             const at::Tensor& v_t, const at::Tensor& beta_t,
                                             const at::Tensor& log_alpha_t) {
  // S' = alpha S + k u^T with u = beta (v - alpha S^T k).
  auto decayed = log_alpha_t.defined() ? log_alpha_t.exp().unsqueeze(-1).unsqueeze(-1) * state : state;
  auto read = torch::matmul(k_t.unsqueeze(-2), decayed).squeeze(-2);  // (B,H,Dv)
  auto u = beta_t.unsqueeze(-1) * (v_t - read);
  auto next = decayed + k_t.unsqueeze(-1) * u.unsqueeze(-2);
  return {torch::matmul(q_t.unsqueeze(-2), next).squeeze(-2), next};
}

AffineResult delta_rule_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                const at::Tensor& log_alpha, const at::Tensor& initial_state, int64_t chunk) {
  constexpr const char* fn = "delta_rule_chunked";
  const auto d = delta_check(fn, q, k, v, beta, log_alpha, initial_state);
  MIXLAB_CHECK(chunk >= 1, "{}: chunk must be >= 1, got {}", fn, chunk);
  if (auto fused = detail::delta_rule_fused(d, q, k, v, beta, log_alpha, initial_state)) return *fused;
  const int64_t B = d.B, H = d.H, T = d.T, Dk = d.Dk, Dv = d.Dv, C = chunk;
  at::Tensor state = detail::affine_initial_or_zeros(initial_state, d, q);
  if (T == 0) return {torch::zeros({B, H, 0, Dv}, q.options()), state};
  const detail::ChunkGrid grid(d, C);
  const int64_t n = grid.n;
  // Padding tokens: k = v = q = 0, beta = 0, alpha = 1: the state passes through unchanged.
  auto chunks = [&](const at::Tensor& t, int64_t D) { return grid.split(t, D); };
  auto scalars = [&](const at::Tensor& t) { return grid.split_scalars(t); };
  auto qc = chunks(q, Dk), kc = chunks(k, Dk), vc = chunks(v, Dv);
  auto bc = scalars(beta);                                                               // (B,H,n,C)
  auto G = log_alpha.defined() ? scalars(log_alpha).cumsum(-1) : torch::zeros_like(bc);  // log gamma_t, <= 0

  // Gamma_tj = gamma_t / gamma_j on and below the diagonal (exponent <= 0), 0 above it.
  auto opts = q.options().dtype(torch::kBool);
  auto upper_incl = torch::ones({C, C}, opts).triu(1);    // j > t
  auto upper_strict = torch::ones({C, C}, opts).triu(0);  // j >= t
  auto gdiff = G.unsqueeze(-1) - G.unsqueeze(-2);         // (B,H,n,C,C)
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto decay_incl = gdiff.masked_fill(upper_incl, neg_inf).exp();
  auto decay_strict = gdiff.masked_fill(upper_strict, neg_inf).exp();

  // UT transform: L U = diag(beta) V - diag(beta gamma) K S_0 with L unit lower triangular.
  auto kk = torch::matmul(kc, kc.transpose(-1, -2));                                      // (B,H,n,C,C)
  auto lower = torch::eye(C, q.options()) + bc.unsqueeze(-1) * (kk * decay_strict);       // (B,H,n,C,C)
  auto rhs = torch::cat({bc.unsqueeze(-1) * vc, (bc * G.exp()).unsqueeze(-1) * kc}, -1);  // (B,H,n,C,Dv+Dk)
  auto w = at::linalg_solve_triangular(lower, rhs, /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  auto wv = w.narrow(-1, 0, Dv), wk = w.narrow(-1, Dv, Dk);

  auto qk = torch::matmul(qc, kc.transpose(-1, -2)) * decay_incl;  // (B,H,n,C,C)
  auto qg = qc * G.exp().unsqueeze(-1);                            // q_t gamma_t
  auto gl = G.narrow(-1, C - 1, 1);                                // log gamma_C (B,H,n,1)
  auto kdec = kc * (gl - G).exp().unsqueeze(-1);                   // k_j gamma_C / gamma_j
  auto carry = gl.exp().unsqueeze(-1);                             // (B,H,n,1,1)

  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<size_t>(n));
  // unbind, not select, in loops: select's backward materialises a full-size zero gradient per call.
  const auto wvs = wv.unbind(2), wks = wk.unbind(2), qgs = qg.unbind(2), qks = qk.unbind(2), kdecs = kdec.unbind(2),
             carries = carry.unbind(2);
  for (size_t c = 0; c < static_cast<size_t>(n); ++c) {
    auto u = wvs[c] - torch::matmul(wks[c], state);  // (B,H,C,Dv)
    outs.push_back(torch::matmul(qgs[c], state) + torch::matmul(qks[c], u));
    state = carries[c] * state + torch::matmul(kdecs[c].transpose(-1, -2), u);
  }
  return {grid.join(torch::stack(outs, 2), Dv), state};
}

AffineStep delta_rule_step(const at::Tensor& state, const at::Tensor& q_t, const at::Tensor& k_t, const at::Tensor& v_t,
                           const at::Tensor& beta_t, const at::Tensor& log_alpha_t) {
  constexpr const char* fn = "delta_rule_step";
  check_defined(fn, "q_t", q_t);
  check_dim(fn, "q_t", q_t, 3, "(B,H,Dk)");
  check_floating(fn, "q_t", q_t);
  const int64_t B = q_t.size(0), H = q_t.size(1), Dk = q_t.size(2);
  detail::affine_check_gate(fn, "k_t", k_t, {B, H, Dk}, "(B,H,Dk)", q_t);
  check_defined(fn, "v_t", v_t);
  check_dim(fn, "v_t", v_t, 3, "(B,H,Dv)");
  detail::affine_check_gate(fn, "v_t", v_t, {B, H, v_t.size(2)}, "(B,H,Dv)", q_t);
  detail::affine_check_gate(fn, "beta_t", beta_t, {B, H}, "(B,H)", q_t);
  detail::affine_check_range(fn, "beta_t", beta_t, 0.0, kBetaMax, "delta-rule write strength");
  if (log_alpha_t.defined()) {
    detail::affine_check_gate(fn, "log_alpha_t", log_alpha_t, {B, H}, "(B,H)", q_t);
    detail::affine_check_range(fn, "log_alpha_t", log_alpha_t, -1e30, 0.0,
                               "log decay, alpha = exp(log_alpha) in (0,1]");
  }
  detail::affine_check_state(fn, state, B, H, Dk, v_t.size(2), q_t);
  return detail::delta_rule_step_unchecked(state, q_t, k_t, v_t, beta_t, log_alpha_t);
}

AffineResult delta_rule_recurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha, const at::Tensor& initial_state) {
  const auto d = delta_check("delta_rule_recurrent", q, k, v, beta, log_alpha, initial_state);
  if (auto fused = detail::delta_rule_fused(d, q, k, v, beta, log_alpha, initial_state)) return *fused;
  const auto qs = q.unbind(2), ks = k.unbind(2), vs = v.unbind(2), bs = beta.unbind(2);
  const auto las = log_alpha.defined() ? log_alpha.unbind(2) : std::vector<at::Tensor>();
  return detail::affine_token_loop(d, q, detail::affine_initial_or_zeros(initial_state, d, q),
                                   [&](const at::Tensor& state, size_t t) {
                                     return detail::delta_rule_step_unchecked(state, qs[t], ks[t], vs[t], bs[t],
                                                                              las.empty() ? at::Tensor() : las[t]);
                                   });
}

AffineResult delta_rule_scan_form(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha, const at::Tensor& initial_state) {
  const auto d = delta_check("delta_rule_scan_form", q, k, v, beta, log_alpha, initial_state);
  auto eye = torch::eye(d.Dk, q.options());
  std::vector<AffineElement> elements;
  const auto qs = q.unbind(2), ks = k.unbind(2), vs = v.unbind(2), bs = beta.unbind(2);
  const auto las = log_alpha.defined() ? log_alpha.unbind(2) : std::vector<at::Tensor>();
  for (size_t t = 0; t < qs.size(); ++t) {
    auto kt = ks[t], vt = vs[t], bt = bs[t].unsqueeze(-1).unsqueeze(-1);
    auto e = eye - bt * (kt.unsqueeze(-1) * kt.unsqueeze(-2));  // I - beta k k^T (B,H,Dk,Dk)
    if (!las.empty()) e = las[t].exp().unsqueeze(-1).unsqueeze(-1) * e;
    elements.push_back({e, bt * (kt.unsqueeze(-1) * vt.unsqueeze(-2)), true});
  }
  AffineElement identity{eye.expand({d.B, d.H, d.Dk, d.Dk}).clone(), torch::zeros({d.B, d.H, d.Dk, d.Dv}, q.options()),
                         true};
  return detail::affine_scan_outputs(d, qs, detail::affine_initial_or_zeros(initial_state, d, q), elements, identity);
}

AffineResult delta_rule_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                                  const at::Tensor& log_alpha, const at::Tensor& initial_state) {
  const auto d = delta_check("delta_rule_reference", q, k, v, beta, log_alpha, initial_state);
  auto eye = torch::eye(d.Dk, q.options());
  return detail::affine_reference_loop(
      d, q, detail::affine_initial_or_zeros(initial_state, d, q), [&](int64_t b, int64_t h, int64_t t) {
        auto kt = k[b][h][t], bt = beta[b][h][t];
        auto e = eye - bt * torch::outer(kt, kt);  // E_t = alpha_t (I - beta_t k_t k_t^T)
        if (log_alpha.defined()) e = log_alpha[b][h][t].exp() * e;
        return std::make_pair(e, bt * torch::outer(kt, v[b][h][t]));  // f_t = beta_t k_t v_t^T
      });
}

}  // namespace mixlab
