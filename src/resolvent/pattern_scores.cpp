// Sampled attention scores over a pattern (forward/backward kernels and autograd), the masked
// softmax over each row's slots, and the one-row decode version.
#include "mixlab/resolvent/pattern_scores.h"

#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "pattern_keys.h"
#include "resolvent_kernel.h"

namespace mixlab {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Per-slice pointers: q, k (T,D); pk (Np,D) past keys; out (T,WS).
template <typename scalar_t>
void scores_forward_slice(const ResolventRows& r, int64_t D, int64_t WS, bool diag, scalar_t scale, const scalar_t* q,
                          const scalar_t* k, const scalar_t* pk, scalar_t* out) {
  const int64_t off = diag ? 1 : 0;
  for (int64_t i = 0; i < r.T; ++i) {
    const scalar_t* qi = q + i * D;
    if (diag) out[i * WS] = detail::dot(qi, k + i * D, D) * scale;
    const int64_t* row = r.offsets ? nullptr : r.src + i * r.W;
    for (int64_t s = 0; s < r.count[i]; ++s) {
      const int64_t j = row ? row[s] : i - r.offsets[s];
      const scalar_t* kj = j >= 0 ? k + j * D : pk + (-j - 2) * D;
      out[i * WS + s + off] = detail::dot(qi, kj, D) * scale;
    }
  }
}

template <typename scalar_t>
void scores_backward_slice(const ResolventRows& r, int64_t D, int64_t WS, bool diag, scalar_t scale, const scalar_t* q,
                           const scalar_t* k, const scalar_t* pk, const scalar_t* ds, scalar_t* __restrict dq,
                           scalar_t* __restrict dk) {
  const int64_t off = diag ? 1 : 0;
  for (int64_t i = 0; i < r.T; ++i) {
    const scalar_t* __restrict qi = q + i * D;
    scalar_t* __restrict dqi = dq + i * D;
    if (diag) {
      const scalar_t g = ds[i * WS] * scale;
      const scalar_t* __restrict ki = k + i * D;
      scalar_t* __restrict dki = dk + i * D;
      for (int64_t d = 0; d < D; ++d) dqi[d] += g * ki[d];
      for (int64_t d = 0; d < D; ++d) dki[d] += g * qi[d];
    }
    const int64_t* row = r.offsets ? nullptr : r.src + i * r.W;
    for (int64_t s = 0; s < r.count[i]; ++s) {
      const int64_t j = row ? row[s] : i - r.offsets[s];
      const scalar_t g = ds[i * WS + s + off] * scale;
      const scalar_t* __restrict kj = j >= 0 ? k + j * D : pk + (-j - 2) * D;
      for (int64_t d = 0; d < D; ++d) dqi[d] += g * kj[d];
      if (j >= 0) {
        scalar_t* __restrict dkj = dk + j * D;
        for (int64_t d = 0; d < D; ++d) dkj[d] += g * qi[d];
      }
    }
  }
}

ResolventRows rows_again(AutogradContext* ctx) {
  return resolvent_rows_restore(Pattern::parse(ctx->saved_data["spec"].toStringRef()), ctx->saved_data["t0"].toInt(),
                                ctx->saved_data["T"].toInt(),
                                ctx->saved_data.count("src") ? ctx->saved_data["src"].toTensor() : Tensor());
}

class ScoresFunction : public torch::autograd::Function<ScoresFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& q_in, const Tensor& k_in, const Tensor& pk_in,
                               const ResolventRows* rows, const std::string& spec, bool diag) {
    auto q = q_in.contiguous(), k = k_in.contiguous(), pk = pk_in.contiguous();
    const int64_t BH = q.size(0) * q.size(1), T = q.size(2), D = q.size(3);
    const int64_t WS = rows->W + (diag ? 1 : 0), Np = pk.numel() > 0 ? pk.size(2) : 0;
    auto out = torch::zeros({q.size(0), q.size(1), T, WS}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pattern_scores", [&] {
      const auto scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(D, 1))));
      at::parallel_for(0, BH, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh)
          scores_forward_slice<scalar_t>(
              *rows, D, WS, diag, scale, q.data_ptr<scalar_t>() + bh * T * D, k.data_ptr<scalar_t>() + bh * T * D,
              Np ? pk.data_ptr<scalar_t>() + bh * Np * D : nullptr, out.data_ptr<scalar_t>() + bh * T * WS);
      });
    });
    ctx->save_for_backward({q, k, pk});
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["t0"] = rows->t0;
    ctx->saved_data["T"] = rows->T;
    ctx->saved_data["diag"] = diag;
    if (rows->t0 > 0) ctx->saved_data["src"] = rows->src_holder;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &pk = saved[2];
    const bool diag = ctx->saved_data["diag"].toBool();
    auto rows = rows_again(ctx);
    const int64_t BH = q.size(0) * q.size(1), T = q.size(2), D = q.size(3);
    const int64_t WS = rows.W + (diag ? 1 : 0), Np = pk.numel() > 0 ? pk.size(2) : 0;
    auto ds = grads[0].defined() ? grads[0].contiguous() : torch::zeros({q.size(0), q.size(1), T, WS}, q.options());
    auto dq = torch::zeros_like(q), dk = torch::zeros_like(k);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pattern_scores_backward", [&] {
      const auto scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(D, 1))));
      at::parallel_for(0, BH, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh)
          scores_backward_slice<scalar_t>(
              rows, D, WS, diag, scale, q.data_ptr<scalar_t>() + bh * T * D, k.data_ptr<scalar_t>() + bh * T * D,
              Np ? pk.data_ptr<scalar_t>() + bh * Np * D : nullptr, ds.data_ptr<scalar_t>() + bh * T * WS,
              dq.data_ptr<scalar_t>() + bh * T * D, dk.data_ptr<scalar_t>() + bh * T * D);
      });
    });
    return {dq, dk, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor pattern_scores(const Tensor& q, const Tensor& k, const Pattern& pattern, bool with_diagonal,
                      const ResolventState* past, int past_key_channel) {
  detail::check_query_keys("pattern_scores", q, k, pattern, past, past_key_channel);
  auto rows = resolvent_rows(pattern, q.size(2), past);
  Tensor pk = torch::empty({0}, q.options());
  if (!rows.past_positions.empty()) pk = past->gather(past->extra_slots(past_key_channel), rows.past_positions);
  return ScoresFunction::apply(q, k, pk, &rows, pattern.spec(), with_diagonal)[0];
}

Tensor pattern_softmax(const Tensor& scores, const Pattern& pattern, bool with_diagonal, int64_t t0) {
  const char* fn = "pattern_softmax";
  check_dim(fn, "scores", scores, 4, "(B,H,T,W)");
  const int64_t T = scores.size(2), WS = scores.size(3);
  const int64_t off = with_diagonal ? 1 : 0;
  const int64_t W = resolvent_width(pattern, t0 + T);
  MIXLAB_CHECK(WS == W + off, "{}: scores must have shape (B,H,T,W{}) with W{} = {}, got {}", fn,
               with_diagonal ? "+1" : "", with_diagonal ? "+1" : "", W + off, shape_string(scores));
  if (WS == 0) return scores;
  auto valid = torch::arange(WS, torch::kLong).unsqueeze(0) <
               (torch::tensor(resolvent_row_counts(pattern, t0, T), torch::kLong) + off).unsqueeze(1);  // (T,WS)
  // A finite fill (not −inf): a row with no valid slot becomes uniform, then masked to 0, and its
  // gradient stays finite.
  auto filled = scores.masked_fill(~valid, -1e30);
  return torch::softmax(filled, -1) * valid.to(scores.scalar_type());
}

Tensor pattern_scores_step(const ResolventState& state, const Tensor& q_t, const Tensor& k_t, bool with_diagonal,
                           int key_channel) {
  const char* fn = "pattern_scores_step";
  const int64_t B = state.batch(), H = state.heads(), t = state.position();
  MIXLAB_CHECK(key_channel >= 0 && static_cast<size_t>(key_channel) < state.layout().extra_dims.size(),
               "{}: key_channel must name one of the state's {} extra channels, got {}", fn,
               state.layout().extra_dims.size(), key_channel);
  const int64_t D = state.layout().extra_dims[key_channel];
  check_shape(fn, "q_t", q_t, {B, H, D}, "(B,H,D)");
  check_shape(fn, "k_t", k_t, {B, H, D}, "(B,H,D)");
  MIXLAB_CHECK(q_t.scalar_type() == state.dtype() && k_t.scalar_type() == state.dtype(),
               "{}: q_t and k_t must have the state's dtype {}, got {} and {}", fn, c10::toString(state.dtype()),
               c10::toString(q_t.scalar_type()), c10::toString(k_t.scalar_type()));
  const auto row = state.next_row();  // P(t)
  const int64_t c = static_cast<int64_t>(row.size()), off = with_diagonal ? 1 : 0;
  std::vector<int64_t> slots(row.size());
  for (size_t s = 0; s < row.size(); ++s) {
    slots[s] = state.slot_of(row[s]);
    MIXLAB_ASSERT(slots[s] >= 0, "state at position {} does not hold position {}", t, row[s]);
  }
  auto q = q_t.contiguous(), k = k_t.contiguous();
  const auto& keys = state.extra_slots(static_cast<size_t>(key_channel));
  const int64_t cap = keys.size(2);
  auto out = torch::empty({B, H, c + off}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pattern_scores_step", [&] {
    const auto scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(D)));
    const scalar_t* kb = keys.data_ptr<scalar_t>();
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const scalar_t* qi = q.data_ptr<scalar_t>() + bh * D;
      scalar_t* o = out.data_ptr<scalar_t>() + bh * (c + off);
      if (with_diagonal) o[0] = detail::dot(qi, k.data_ptr<scalar_t>() + bh * D, D) * scale;
      for (int64_t s = 0; s < c; ++s) o[s + off] = detail::dot(qi, kb + (bh * cap + slots[s]) * D, D) * scale;
    }
  });
  return out;
}

}  // namespace mixlab
