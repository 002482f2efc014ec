// The affine mixers' decode step on raw rows (AffineMixer::step_rows, mixlab/scan/affine_mixer.h).
//
// A decode step of the d = 64 compare model is ~20 k multiply-adds per layer, yet the ATen step
// (prepare, the kernel's step, finish) was 25-45 dispatched ops per token: 40-100 µs of
// dispatch for well under 10 µs of arithmetic. Here one concatenated matrix-vector product gives
// every input projection, each member's nonlinearities run per head on the projected row, the
// state is updated in place, and the output projection is one more matrix-vector product.
//
// It computes the same formulas as prepare() / the kernels' *_step / finish() (affine_mixer.cpp,
// affine_diag.cpp, affine_delta.cpp) in the same order, so it equals that path to float rounding;
// tests/scan/affine_mixer_test.cpp checks it against the ATen step for every member in float and
// double, and against forward row by row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/scan/affine_mixer.h"

namespace mixlab {
namespace {

using row::log_sigmoid;
using row::sigmoid;
using row::silu;
using row::softplus;

template <typename T>
T elu_plus_one(T x) {
  return x > T(0) ? x + T(1) : std::exp(x);
}
template <typename T>
void l2_normalise(T* x, int64_t n) {  // x / sqrt(sum x^2 + 1e-6), as affine_mixer.cpp
  const T inv = T(1) / std::sqrt(row::dot(x, x, n) + T(1e-6));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}
template <typename T>
void rms_norm(T* x, int64_t n) {  // x * rsqrt(mean x^2 + 1e-6), as affine_mixer.cpp
  const T inv = T(1) / std::sqrt(row::dot(x, x, n) / T(n) + T(1e-6));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

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
  for (auto* m : {&gate_proj_, &decay_proj_, &aux_proj_})
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
    if (m == &gate_proj_) rows_gate_ = offset;
    if (m == &decay_proj_) rows_decay_ = offset;
    if (m == &aux_proj_) rows_aux_ = offset;
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
  const T scale = static_cast<T>(1.0 / std::sqrt(double(Dk)));
  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(N + 4 * Dk + 3 * Dvp + nv + nq));
  T* proj = buf.data();     // (N) the projected row
  T* qh = proj + N;         // (Dk) this head's query
  T* kh = qh + Dk;          // (Dk) key
  T* decay = kh + Dk;       // (Dk) per-key decay factor exp(g)
  T* scratch = decay + Dk;  // (Dk) gated_rfa's feature projection
  T* vh = scratch + Dk;     // (Dv') value, with the normaliser's one
  T* u = vh + Dvp;          // (Dv') delta rule: u = beta (v - alpha S^T k)
  T* o = u + Dvp;           // (Dv') o = S'^T q
  T* y = o + Dvp;           // (H*Dv) the heads' outputs before o_proj
  T* gla = y + nv;          // (H*Dk) GLA's data-dependent log decay before logsigmoid

  const T* W = rows_w_.data_ptr<T>();
  const T* bias = rows_b_.data_ptr<T>();
  T* S_all = state.s_.data_ptr<T>();
  for (int64_t r = 0; r < B; ++r) {
    const T* x = x_t.data_ptr<T>() + r * C;
    row::linear<T>(W, bias, x, proj, N, C);
    const T* q_row = proj;
    const T* k_row = proj + nq;
    const T* v_row = proj + 2 * nq;
    const T* gate_row = rows_gate_ >= 0 ? proj + rows_gate_ : nullptr;
    const T* decay_row = rows_decay_ >= 0 ? proj + rows_decay_ : nullptr;
    const T* aux_row = rows_aux_ >= 0 ? proj + rows_aux_ : nullptr;
    if (member_ == AffineMember::kGla) {  // log decay = logsigmoid(W2 (W1 x) + b2) / 16, per key
      row::linear<T>(decay_proj2_->weight.data_ptr<T>(), decay_proj2_->bias.data_ptr<T>(), decay_row, gla, nq,
                     decay_proj2_->weight.size(1));
    }
    for (int64_t h = 0; h < H; ++h) {
      std::copy(q_row + h * Dk, q_row + (h + 1) * Dk, qh);
      std::copy(k_row + h * Dk, k_row + (h + 1) * Dk, kh);
      std::copy(v_row + h * Dv, v_row + (h + 1) * Dv, vh);
      if (Dvp > Dv) vh[Dv] = T(1);  // the normaliser's ones column
      T alpha = T(1), beta = T(0);  // delta rule
      T* yh = y + h * Dv;
      switch (member_) {
        case AffineMember::kLinearAttn:
          for (int64_t i = 0; i < Dk; ++i) {
            qh[i] = elu_plus_one(qh[i]);
            kh[i] = elu_plus_one(kh[i]);
            decay[i] = T(1);
          }
          break;
        case AffineMember::kRetNet: {
          const T d = std::exp(retnet_log_gamma_.data_ptr<T>()[h]);
          for (int64_t i = 0; i < Dk; ++i) {
            qh[i] *= scale;
            decay[i] = d;
          }
          break;
        }
        case AffineMember::kGla:
          for (int64_t i = 0; i < Dk; ++i) {
            qh[i] *= scale;
            decay[i] = std::exp(log_sigmoid(gla[h * Dk + i]) / static_cast<T>(kGlaDecayNormaliser));
          }
          break;
        case AffineMember::kMamba: {
          const T delta = softplus(aux_row[h] + dt_bias_.data_ptr<T>()[h]);
          const T* a_log = a_log_.data_ptr<T>() + h * Dk;
          for (int64_t i = 0; i < Dk; ++i) {
            kh[i] *= delta;
            decay[i] = std::exp(delta * -std::exp(a_log[i]));
          }
          for (int64_t j = 0; j < Dv; ++j) vh[j] = silu(vh[j]);
          break;
        }
        case AffineMember::kMlstm: {
          const T input = sigmoid(aux_row[h]);
          const T forget = std::exp(log_sigmoid(decay_row[h]));
          for (int64_t i = 0; i < Dk; ++i) {
            qh[i] *= scale;
            kh[i] *= input;
            decay[i] = forget;
          }
          break;
        }
        case AffineMember::kGatedRfa: {
          // phi(t) = exp(W_h t/|t| - 1/2) / sqrt(Dk); k' = phi(k) (1 - g), decay g = sigmoid(logit).
          const T logit = decay_row[h];
          const T* Wf = rfa_w_.data_ptr<T>() + h * Dk * Dk;
          const T inv_sqrt = static_cast<T>(1.0 / std::sqrt(double(Dk)));
          auto phi = [&](T* t, T post) {
            l2_normalise(t, Dk);
            row::linear<T>(Wf, nullptr, t, scratch, Dk, Dk);
            for (int64_t i = 0; i < Dk; ++i) t[i] = std::exp(scratch[i] - T(0.5)) * inv_sqrt * post;
          };
          phi(qh, T(1));
          phi(kh, sigmoid(-logit));
          const T g = std::exp(log_sigmoid(logit));
          for (int64_t i = 0; i < Dk; ++i) decay[i] = g;
          break;
        }
        case AffineMember::kDeltaNet:
        case AffineMember::kGatedDeltaNet:
          for (int64_t i = 0; i < Dk; ++i) {
            qh[i] = silu(qh[i]);
            kh[i] = silu(kh[i]);
          }
          l2_normalise(qh, Dk);
          l2_normalise(kh, Dk);
          for (int64_t i = 0; i < Dk; ++i) qh[i] *= scale;
          beta = sigmoid(aux_row[h]);
          if (member_ == AffineMember::kGatedDeltaNet)
            alpha = std::exp(-std::exp(a_log_.data_ptr<T>()[h]) * softplus(decay_row[h] + dt_bias_.data_ptr<T>()[h]));
          break;
        case AffineMember::kCount:
          MIXLAB_ASSERT(false, "kCount is not a member");
      }
      // The recurrence on this head's state S (Dk, Dv'), in place; o = S'^T q into vh's place.
      T* S = S_all + (r * H + h) * Dk * Dvp;
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
      // finish(): the member's normalisation and output gate.
      const T* gate = gate_row ? gate_row + h * Dv : nullptr;
      switch (member_) {
        case AffineMember::kLinearAttn:
        case AffineMember::kGatedRfa: {
          const T z = o[Dv] + T(1e-6);
          for (int64_t j = 0; j < Dv; ++j) yh[j] = o[j] / z;
          break;
        }
        case AffineMember::kMlstm: {
          const T z = std::max(std::abs(o[Dv]), T(1));
          for (int64_t j = 0; j < Dv; ++j) yh[j] = o[j] / z * sigmoid(gate[j]);
          break;
        }
        case AffineMember::kMamba: {
          const T* d_skip = d_skip_.data_ptr<T>() + h * Dv;
          for (int64_t j = 0; j < Dv; ++j) yh[j] = (o[j] + vh[j] * d_skip[j]) * silu(gate[j]);
          break;
        }
        case AffineMember::kRetNet:
        case AffineMember::kGla:
        case AffineMember::kGatedDeltaNet:
        case AffineMember::kDeltaNet:
          std::copy(o, o + Dv, yh);
          rms_norm(yh, Dv);
          if (gate)
            for (int64_t j = 0; j < Dv; ++j) yh[j] *= silu(gate[j]);
          break;
        case AffineMember::kCount:
          MIXLAB_ASSERT(false, "kCount is not a member");
      }
    }
    row::linear<T>(o_proj_->weight.data_ptr<T>(), nullptr, y, out.data_ptr<T>() + r * C, C, nv);
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
