// The token loop, scan form and reference loop shared by the diagonal-decay and delta-rule
// kernels (affine_forms.h).
#include "affine_forms.h"

#include "mixlab/scan/scan.h"

namespace mixlab::detail {

at::Tensor affine_initial_or_zeros(const at::Tensor& initial_state, const AffineDims& d, const at::Tensor& q) {
  return initial_state.defined() ? initial_state : torch::zeros({d.B, d.H, d.Dk, d.Dv}, q.options());
}

namespace {

// Outputs (B,H,T,Dv) from per-token (B,H,Dv) pieces; an empty sequence gives T = 0.
at::Tensor stack_outputs(const AffineDims& d, const at::Tensor& q, const std::vector<at::Tensor>& outs) {
  return d.T ? torch::stack(outs, 2) : torch::zeros({d.B, d.H, 0, d.Dv}, q.options());
}

}  // namespace

AffineResult affine_token_loop(const AffineDims& d, const at::Tensor& q, const at::Tensor& s0,
                               const std::function<AffineStep(const at::Tensor& state, size_t t)>& step) {
  at::Tensor state = s0;
  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<size_t>(d.T));
  for (size_t t = 0; t < static_cast<size_t>(d.T); ++t) {
    auto st = step(state, t);
    outs.push_back(st.out);
    state = st.state;
  }
  return {stack_outputs(d, q, outs), state};
}

AffineResult affine_scan_outputs(const AffineDims& d, const std::vector<at::Tensor>& qs, const at::Tensor& s0,
                                 const std::vector<AffineElement>& elements, const AffineElement& identity) {
  auto prefix = blelloch_scan(elements, affine_combine, identity);
  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<size_t>(d.T));
  for (size_t t = 0; t < static_cast<size_t>(d.T); ++t) {
    const auto& p = prefix[t + 1];
    auto s = affine_apply(p, s0) + p.f;
    outs.push_back(torch::matmul(qs[t].unsqueeze(-2), s).squeeze(-2));
  }
  const auto& total = prefix.back();
  return {stack_outputs(d, s0, outs), affine_apply(total, s0) + total.f};
}

AffineResult affine_reference_loop(
    const AffineDims& d, const at::Tensor& q, const at::Tensor& s0,
    const std::function<std::pair<at::Tensor, at::Tensor>(int64_t b, int64_t h, int64_t t)>& element) {
  std::vector<at::Tensor> out_b, final_b;
  for (int64_t b = 0; b < d.B; ++b) {
    std::vector<at::Tensor> out_h, final_h;
    for (int64_t h = 0; h < d.H; ++h) {
      at::Tensor s = s0[b][h];  // (Dk,Dv)
      std::vector<at::Tensor> out_t;
      for (int64_t t = 0; t < d.T; ++t) {
        auto [e, f] = element(b, h, t);  // E_t (Dk,Dk), f_t (Dk,Dv)
        s = torch::mm(e, s) + f;         // E_t ▸ s + f_t
        out_t.push_back(torch::mv(s.t(), q[b][h][t]));
      }
      out_h.push_back(d.T ? torch::stack(out_t) : torch::zeros({0, d.Dv}, q.options()));
      final_h.push_back(s);
    }
    out_b.push_back(torch::stack(out_h));
    final_b.push_back(torch::stack(final_h));
  }
  return {torch::stack(out_b), torch::stack(final_b)};
}

}  // namespace mixlab::detail
