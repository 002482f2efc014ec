// RoPE + sampled scores + masked softmax over a pattern in one op (forward and backward kernels,
// autograd). The composed form it replaces (rope_apply, pattern_scores, pattern_softmax) is the
// reference in tests/resolvent/pattern_attention_test.cpp.
#include "mixlab/resolvent/pattern_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "mixlab/core/cpu_isa.h"
#include "mixlab/core/rope.h"
#include "mixlab/resolvent/pattern_scores.h"
#include "pattern_attention_kernels.h"
#include "pattern_keys.h"

namespace mixlab {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

namespace kernels = detail::pattern_attention_kernels;
using kernels::AttentionRows;
using kernels::key_row;
using kernels::rotate_row;
using kernels::rotate_row_back;
using kernels::slot_source;

// A dot product with lane accumulators, so that GCC vectorises it without -ffast-math (a single
// accumulator is a serial reduction it may not reorder).
template <typename scalar_t>
inline scalar_t dot_lanes(const scalar_t* __restrict a, const scalar_t* __restrict b, int64_t D) {
  constexpr int64_t kLanes = 8;
  scalar_t acc[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[d + l] * b[d + l];
  scalar_t s = 0;
  for (int64_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

// The plain loops (any head dim; the reference of the vector loops in pattern_attention_kernels.inc).
// One (b,h) slice. q, k: row t at q + t·q_stride (D contiguous); pk (Np,D) past keys, already
// rotated; qr, kr (T,D) out: rotated rows; probs (T,WS) out; scores: WS scratch.
template <typename scalar_t>
void attention_forward_slice(const AttentionRows<scalar_t>& p, const scalar_t* q, int64_t q_stride, const scalar_t* k,
                             int64_t k_stride, const scalar_t* pk, scalar_t* qr, scalar_t* kr, scalar_t* probs,
                             scalar_t* scores) {
  const int64_t D = p.D, WS = p.WS;
  for (int64_t t = 0; t < p.T; ++t) {
    rotate_row(p, t, q + t * q_stride, qr + t * D);
    rotate_row(p, t, k + t * k_stride, kr + t * D);
  }
  for (int64_t i = 0; i < p.T; ++i) {
    const scalar_t* qi = qr + i * D;
    const int64_t n = p.count[i] + (p.diag ? 1 : 0);
    scalar_t* out = probs + i * WS;
    scalar_t top = -std::numeric_limits<scalar_t>::infinity();
    for (int64_t s = 0; s < n; ++s) {
      const int64_t j = slot_source(p, i, s);
      scores[s] = dot_lanes(qi, key_row(kr, pk, j, D), D) * p.scale;
      top = std::max(top, scores[s]);
    }
    scalar_t sum = 0;
    for (int64_t s = 0; s < n; ++s) {
      out[s] = std::exp(scores[s] - top);
      sum += out[s];
    }
    const scalar_t inv = n > 0 ? scalar_t(1) / sum : scalar_t(0);
    for (int64_t s = 0; s < n; ++s) out[s] *= inv;
    std::fill(out + n, out + WS, scalar_t(0));
  }
}

// Backward of one slice: dscore_s = P_s (dP_s − Σ P dP) (softmax), then the sampled product's
// dq_i += dscore·k_j, dk_j += dscore·q_i (chunk keys only), then both rotated back.
// dq, dk (T,D) zeroed on entry.
template <typename scalar_t>
void attention_backward_slice(const AttentionRows<scalar_t>& p, const scalar_t* qr, const scalar_t* kr,
                              const scalar_t* pk, const scalar_t* probs, const scalar_t* dprobs, scalar_t* dq,
                              scalar_t* dk) {
  const int64_t D = p.D, WS = p.WS;
  for (int64_t i = 0; i < p.T; ++i) {
    const int64_t n = p.count[i] + (p.diag ? 1 : 0);
    const scalar_t* P = probs + i * WS;
    const scalar_t* dP = dprobs + i * WS;
    scalar_t mean = 0;
    for (int64_t s = 0; s < n; ++s) mean += P[s] * dP[s];
    const scalar_t* __restrict qi = qr + i * D;
    scalar_t* __restrict dqi = dq + i * D;
    for (int64_t s = 0; s < n; ++s) {
      const scalar_t g = P[s] * (dP[s] - mean) * p.scale;
      const int64_t j = slot_source(p, i, s);
      const scalar_t* __restrict kj = key_row(kr, pk, j, D);
      for (int64_t d = 0; d < D; ++d) dqi[d] += g * kj[d];
      if (j >= 0) {
        scalar_t* __restrict dkj = dk + j * D;
        for (int64_t d = 0; d < D; ++d) dkj[d] += g * qi[d];
      }
    }
  }
  for (int64_t t = 0; t < p.T; ++t) {
    rotate_row_back(p, t, dq + t * D);
    rotate_row_back(p, t, dk + t * D);
  }
}

ResolventRows rows_again(AutogradContext* ctx) {
  return resolvent_rows_restore(Pattern::parse(ctx->saved_data["spec"].toStringRef()), ctx->saved_data["t0"].toInt(),
                                ctx->saved_data["T"].toInt(),
                                ctx->saved_data.count("src") ? ctx->saved_data["src"].toTensor() : Tensor());
}

template <typename scalar_t>
AttentionRows<scalar_t> make_params(const ResolventRows& rows, int64_t D, bool diag, const RopeTable* rope) {
  AttentionRows<scalar_t> p;
  p.T = rows.T;
  p.D = D;
  p.W = rows.W;
  p.WS = rows.W + (diag ? 1 : 0);
  p.diag = diag;
  p.scale = static_cast<scalar_t>(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(D, 1))));
  p.count = rows.count;
  p.offsets = rows.offsets;
  p.src = rows.src;
  if (rope) {
    p.cos = rope->cos.data_ptr<scalar_t>();
    p.sin = rope->sin.data_ptr<scalar_t>();
  }
  return p;
}

// The slice loops of one call: the vector loops of this CPU's instruction set where they run the
// head dim (and no PatternAttentionPlainLoopsGuard is alive), else the plain loops above.
template <typename scalar_t>
struct SliceLoops {
  void (*forward)(const AttentionRows<scalar_t>&, const scalar_t*, int64_t, const scalar_t*, int64_t, const scalar_t*,
                  scalar_t*, scalar_t*, scalar_t*);
  void (*backward)(const AttentionRows<scalar_t>&, const scalar_t*, const scalar_t*, const scalar_t*, const scalar_t*,
                   const scalar_t*, scalar_t*, scalar_t*, scalar_t*);
  bool vector;  // backward wants dq zeroed only for the plain loops
};

template <typename scalar_t>
void plain_forward(const AttentionRows<scalar_t>& p, const scalar_t* q, int64_t q_stride, const scalar_t* k,
                   int64_t k_stride, const scalar_t* pk, scalar_t* qr, scalar_t* kr, scalar_t* probs) {
  thread_local std::vector<scalar_t> scores;
  scores.resize(static_cast<size_t>(std::max<int64_t>(p.WS, 1)));
  attention_forward_slice<scalar_t>(p, q, q_stride, k, k_stride, pk, qr, kr, probs, scores.data());
}

template <typename scalar_t>
void plain_backward(const AttentionRows<scalar_t>& p, const scalar_t* qr, const scalar_t* kr, const scalar_t* pk,
                    const scalar_t* probs, const scalar_t* dprobs, scalar_t* dq, scalar_t* dk, scalar_t*) {
  attention_backward_slice<scalar_t>(p, qr, kr, pk, probs, dprobs, dq, dk);
}

template <typename scalar_t>
SliceLoops<scalar_t> slice_loops(int64_t D) {
  if (PatternAttentionPlainLoopsGuard::active() || !kernels::supports<scalar_t>(D))
    return {plain_forward<scalar_t>, plain_backward<scalar_t>, false};
#define MIXLAB_PATTERN_ATTENTION_LOOPS(isa)                                                       \
  SliceLoops<scalar_t> {                                                                          \
    static_cast<decltype(SliceLoops<scalar_t>::forward)>(kernels::isa::forward_slice),            \
        static_cast<decltype(SliceLoops<scalar_t>::backward)>(kernels::isa::backward_slice), true \
  }
  return MIXLAB_ISA_SELECT(cpu_isa(), MIXLAB_PATTERN_ATTENTION_LOOPS);
#undef MIXLAB_PATTERN_ATTENTION_LOOPS
}

std::optional<RopeTable> table_of(double rope_base, int64_t t0, int64_t T, int64_t D, torch::ScalarType dtype) {
  if (rope_base <= 0) return std::nullopt;
  return rope_table(t0, T, D, rope_base, dtype);
}

class PatternAttentionFunction : public torch::autograd::Function<PatternAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& q_in, const Tensor& k_in, const Tensor& pk_in,
                               const ResolventRows* rows, const std::string& spec, bool diag, double rope_base) {
    // Rows are read strided over T; only the last dim must be contiguous.
    auto q = q_in.stride(3) == 1 ? q_in : q_in.contiguous();
    auto k = k_in.stride(3) == 1 ? k_in : k_in.contiguous();
    auto pk = pk_in.contiguous();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
    const int64_t WS = rows->W + (diag ? 1 : 0), Np = pk.numel() > 0 ? pk.size(2) : 0;
    auto probs = torch::empty({B, H, T, WS}, q.options());
    auto qr = torch::empty({B, H, T, D}, q.options()), kr = torch::empty({B, H, T, D}, q.options());
    const auto rope = table_of(rope_base, rows->t0, T, D, q.scalar_type());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "pattern_attention", [&] {
      const auto p = make_params<scalar_t>(*rows, D, diag, rope ? &*rope : nullptr);
      const auto loops = slice_loops<scalar_t>(D);  // outside the parallel region: cpu_isa() may throw
      const scalar_t *qd = q.data_ptr<scalar_t>(), *kd = k.data_ptr<scalar_t>();
      at::parallel_for(0, B * H, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t bh = b0; bh < b1; ++bh) {
          const int64_t b = bh / H, h = bh % H;
          loops.forward(p, qd + b * q.stride(0) + h * q.stride(1), q.stride(2), kd + b * k.stride(0) + h * k.stride(1),
                        k.stride(2), Np ? pk.data_ptr<scalar_t>() + bh * Np * D : nullptr,
                        qr.data_ptr<scalar_t>() + bh * T * D, kr.data_ptr<scalar_t>() + bh * T * D,
                        probs.data_ptr<scalar_t>() + bh * T * WS);
        }
      });
    });
    ctx->save_for_backward({qr, kr, pk, probs});
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["t0"] = rows->t0;
    ctx->saved_data["T"] = rows->T;
    ctx->saved_data["diag"] = diag;
    ctx->saved_data["rope_base"] = rope_base;
    if (rows->t0 > 0) ctx->saved_data["src"] = rows->src_holder;
    ctx->mark_non_differentiable({qr, kr});
    return {probs, qr, kr};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &qr = saved[0], &kr = saved[1], &pk = saved[2], &probs = saved[3];
    const bool diag = ctx->saved_data["diag"].toBool();
    auto rows = rows_again(ctx);
    const int64_t B = qr.size(0), H = qr.size(1), T = qr.size(2), D = qr.size(3);
    const int64_t WS = probs.size(3), Np = pk.numel() > 0 ? pk.size(2) : 0;
    if (!grads[0].defined())
      return {torch::zeros_like(qr), torch::zeros_like(kr), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    auto dprobs = grads[0].contiguous();
    const auto rope = table_of(ctx->saved_data["rope_base"].toDouble(), rows.t0, T, D, qr.scalar_type());
    Tensor dq, dk = torch::zeros_like(kr);
    AT_DISPATCH_FLOATING_TYPES(qr.scalar_type(), "pattern_attention_backward", [&] {
      const auto p = make_params<scalar_t>(rows, D, diag, rope ? &*rope : nullptr);
      const auto loops = slice_loops<scalar_t>(D);
      // The vector loops write dq whole; the plain ones add into it.
      dq = loops.vector ? torch::empty_like(qr) : torch::zeros_like(qr);
      at::parallel_for(0, B * H, 1, [&](int64_t b0, int64_t b1) {
        std::vector<scalar_t> scratch(static_cast<size_t>(std::max<int64_t>(WS, 1)));
        for (int64_t bh = b0; bh < b1; ++bh)
          loops.backward(p, qr.data_ptr<scalar_t>() + bh * T * D, kr.data_ptr<scalar_t>() + bh * T * D,
                         Np ? pk.data_ptr<scalar_t>() + bh * Np * D : nullptr, probs.data_ptr<scalar_t>() + bh * T * WS,
                         dprobs.data_ptr<scalar_t>() + bh * T * WS, dq.data_ptr<scalar_t>() + bh * T * D,
                         dk.data_ptr<scalar_t>() + bh * T * D, scratch.data());
      });
    });
    return {dq, dk, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

bool pattern_attention_runs_vector_loops(int64_t head_dim, torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return kernels::supports<float>(head_dim);
  if (dtype == torch::kDouble) return kernels::supports<double>(head_dim);
  return false;
}

PatternAttention pattern_attention(const Tensor& q, const Tensor& k, const Pattern& pattern, bool with_diagonal,
                                   double rope_base, const ResolventState* past, int past_key_channel) {
  const char* fn = "pattern_attention";
  detail::check_query_keys(fn, q, k, pattern, past, past_key_channel);
  MIXLAB_CHECK(rope_base <= 0 || q.size(3) % 2 == 0,
               "{}: RoPE needs an even head dim D, got q of shape {} (pass rope_base <= 0 for no rotation)", fn,
               shape_string(q));
  MIXLAB_CHECK(std::isfinite(rope_base), "{}: rope_base must be finite, got {}", fn, rope_base);
  if (ComposedPatternAttentionGuard::active()) {
    const int64_t t0 = past ? past->position() : 0;
    auto qr = rope_base > 0 ? rope_apply(q, t0, rope_base) : q;
    auto kr = rope_base > 0 ? rope_apply(k, t0, rope_base) : k;
    auto probs = pattern_softmax(pattern_scores(qr, kr, pattern, with_diagonal, past, past_key_channel), pattern,
                                 with_diagonal, t0);
    return {probs, qr, kr};
  }
  auto rows = resolvent_rows(pattern, q.size(2), past);
  Tensor pk = torch::empty({0}, q.options());
  if (!rows.past_positions.empty()) pk = past->gather(past->extra_slots(past_key_channel), rows.past_positions);
  auto out = PatternAttentionFunction::apply(q, k, pk, &rows, pattern.spec(), with_diagonal, rope_base);
  return {out[0], out[1], out[2]};
}

}  // namespace mixlab
