// The affine mixers' decode step on raw rows (AffineMixer::step_rows, mixlab/scan/affine_mixer.h).
//
// A decode step of the d = 64 compare model is ~20 k multiply-adds per layer, yet the ATen step
// (prepare, the kernel's step, finish) was 25-45 dispatched ops per token: 40-100 µs of
// dispatch for well under 10 µs of arithmetic. Here one concatenated matrix-vector product gives
// every input projection, each member's nonlinearities run per head on the projected row (the
// hooks of its file, src/scan/affine_member_<name>.cpp), the state is updated in place, and the
// output projection is one more matrix-vector product.
//
// It computes the same formulas as prepare() / the kernels' *_step / finish() (the member's file,
// affine_diag.cpp, affine_delta.cpp) in the same order, so it equals that path to float rounding;
// tests/scan/affine_mixer_test.cpp checks it against the ATen step for every member in float and
// double, and against forward row by row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "affine_member.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/scan/affine_mixer.h"

namespace mixlab {

namespace am = detail::affine_member;  // affine_member.h

bool AffineMixer::rows_ready(const torch::Tensor& x_t, const torch::Tensor& s) {
  if (torch::GradMode::is_enabled()) return false;
  // The state is float or double, contiguous, on the CPU; x_t, every parameter and buffer of its
  // dtype on the CPU (x_t may be strided, a time slice: step_rows takes a contiguous copy).
  if (!row::raw_rows_ok(s, {}, 4) || x_t.dim() != 2 || !x_t.device().is_cpu() || x_t.scalar_type() != s.scalar_type())
    return false;
  auto fits = [&](const torch::Tensor& t) {
    return t.is_contiguous() && t.device().is_cpu() && t.scalar_type() == s.scalar_type();
  };
  for (const auto& p : parameters())
    if (!fits(p)) return false;
  for (const auto& b : buffers())
    if (!fits(b)) return false;
  return true;
}

void AffineMixer::rows_pack() {
  // [q; k; v; gate?; decay?; aux?] stacked as one (N, C) weight with its bias (zeros where a
  // projection has none); rebuilt when any weight changed (version counters), like the fused
  // ATen decode matmul.
  std::vector<torch::nn::Linear*> projs = {&q_proj_, &k_proj_, &v_proj_};
  for (auto* m : {&impl_->gate_proj, &impl_->decay_proj, &impl_->aux_proj})
    if (*m) projs.push_back(m);
  std::vector<int64_t> versions;
  for (auto* m : projs) {
    versions.push_back((*m)->weight._version());
    if ((*m)->bias.defined()) versions.push_back((*m)->bias._version());
  }
  const auto dtype = q_proj_->weight.scalar_type();
  if (rows_w_.defined() && versions == rows_versions_ && rows_w_.scalar_type() == dtype) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> ws, bs;
  int64_t offset = 0;
  rows_gate_ = rows_decay_ = rows_aux_ = -1;
  for (auto* m : projs) {
    if (m == &impl_->gate_proj) rows_gate_ = offset;
    if (m == &impl_->decay_proj) rows_decay_ = offset;
    if (m == &impl_->aux_proj) rows_aux_ = offset;
    ws.push_back((*m)->weight);
    const int64_t n = (*m)->weight.size(0);
    bs.push_back((*m)->bias.defined() ? (*m)->bias : torch::zeros({n}, (*m)->weight.options()));
    offset += n;
  }
  rows_w_ = torch::cat(ws, 0).contiguous();
  rows_b_ = torch::cat(bs, 0).contiguous();
  rows_versions_ = versions;
}

template <typename T>
void AffineMixer::step_rows_typed(AffineState& state, const torch::Tensor& x_t, torch::Tensor& out) {
  const int64_t B = x_t.size(0), C = dims_.d_model, H = heads_, Dk = dk_, Dv = dv_, Dvp = state_dv();
  const int64_t N = rows_w_.size(0), nq = H * Dk, nv = H * Dv;
  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(N + 4 * Dk + 3 * Dvp + nv + nq));
  T* proj = buf.data();     // (N) the projected row
  T* qh = proj + N;         // (Dk) this head's query
  T* kh = qh + Dk;          // (Dk) key
  T* decay = kh + Dk;       // (Dk) per-key decay factor exp(g)
  T* scratch = decay + Dk;  // (Dk) the member's per-head scratch (gated_rfa's feature projection)
  T* vh = scratch + Dk;     // (Dv') value, with the normaliser's one
  T* u = vh + Dvp;          // (Dv') delta rule: u = beta (v - alpha S^T k)
  T* o = u + Dvp;           // (Dv') o = S'^T q
  T* y = o + Dvp;           // (H*Dv) the heads' outputs before o_proj
  T* row_scratch = y + nv;  // (H*Dk) the member's per-row scratch (GLA's log decay before logsigmoid)

  // The member's hooks (its file) see the rows through r: the row's projections and scratch, then
  // per head q, k, v, decay, alpha, beta (prepare_head) and o -> y (finish_head).
  am::AffineMemberImpl& member = *impl_;
  am::AffineRowHead<T> r;
  r.scale = static_cast<T>(1.0 / std::sqrt(double(Dk)));
  r.row_scratch = row_scratch;
  r.q = qh;
  r.k = kh;
  r.v = vh;
  r.decay = decay;
  r.scratch = scratch;
  r.o = o;
  const T* W = rows_w_.data_ptr<T>();
  const T* bias = rows_b_.data_ptr<T>();
  T* S_all = state.s_.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {
    const T* x = x_t.data_ptr<T>() + b * C;
    row::linear<T>(W, bias, x, proj, N, C);
    const T* q_row = proj;
    const T* k_row = proj + nq;
    const T* v_row = proj + 2 * nq;
    r.gate_row = rows_gate_ >= 0 ? proj + rows_gate_ : nullptr;
    r.decay_row = rows_decay_ >= 0 ? proj + rows_decay_ : nullptr;
    r.aux_row = rows_aux_ >= 0 ? proj + rows_aux_ : nullptr;
    member.begin_row(r);
    for (int64_t h = 0; h < H; ++h) {
      std::copy(q_row + h * Dk, q_row + (h + 1) * Dk, qh);
      std::copy(k_row + h * Dk, k_row + (h + 1) * Dk, kh);
      std::copy(v_row + h * Dv, v_row + (h + 1) * Dv, vh);
      if (Dvp > Dv) vh[Dv] = T(1);  // the normaliser's ones column
      r.h = h;
      r.alpha = T(1);  // delta rule
      r.beta = T(0);
      r.y = y + h * Dv;
      member.prepare_head(r);  // prepare(): the member's q, k, v, decay or alpha, beta
      const T alpha = r.alpha, beta = r.beta;
      // The recurrence on this head's state S (Dk, Dv'), in place; o = S'^T q.
      T* S = S_all + (b * H + h) * Dk * Dvp;
      std::fill(o, o + Dvp, T(0));
      if (info().kernel == AffineKernel::kDiagDecay) {
        for (int64_t i = 0; i < Dk; ++i) {
          T* Si = S + i * Dvp;
          const T d = decay[i], ki = kh[i], qi = qh[i];
          for (int64_t j = 0; j < Dvp; ++j) {
            Si[j] = d * Si[j] + ki * vh[j];
            o[j] += Si[j] * qi;
          }
        }
      } else {
        // S' = alpha S + k u^T, u = beta (v - alpha S^T k) (affine_delta.cpp's step).
        std::fill(u, u + Dvp, T(0));
        for (int64_t i = 0; i < Dk; ++i) row::axpy<T>(kh[i], S + i * Dvp, u, Dvp);
        for (int64_t j = 0; j < Dvp; ++j) u[j] = beta * (vh[j] - alpha * u[j]);
        for (int64_t i = 0; i < Dk; ++i) {
          T* Si = S + i * Dvp;
          const T ki = kh[i], qi = qh[i];
          for (int64_t j = 0; j < Dvp; ++j) {
            Si[j] = alpha * Si[j] + ki * u[j];
            o[j] += Si[j] * qi;
          }
        }
      }
      member.finish_head(r);  // finish(): the member's normalisation and output gate, o -> y
    }
    row::linear<T>(o_proj_->weight.data_ptr<T>(), nullptr, y, out.data_ptr<T>() + b * C, C, nv);
  }
}

torch::Tensor AffineMixer::step_rows(AffineState& state, const torch::Tensor& x_t) {
  rows_pack();
  auto out = at::empty({x_t.size(0), dims_.d_model}, x_t.options());
  AT_DISPATCH_FLOATING_TYPES(x_t.scalar_type(), "affine step_rows",
                             [&] { step_rows_typed<scalar_t>(state, x_t, out); });
  ++state.pos_;
  return out;
}

}  // namespace mixlab
