// ResolventMixer's decode step on raw rows (ResolventMixer::step_rows, mixlab/resolvent/resolvent_mixer.h).
//
// A decode step of the d = 64 compare model is ~30 k multiply-adds per layer (the projections;
// the pattern part is |P(t)|·D per head, |P(t)| = O(log t) for pow2+cache), yet the ATen step
// (projection, views, four RoPE calls, two score ops, two softmaxes, resolvent_step's boundary
// checks and its append through ATen copies, the output projection) was ~80 dispatched ops per
// token: ~80 µs of dispatch per layer. Here one matrix-vector product gives every input
// projection, RoPE, scores, softmax and the one-row solve run per head on the projected row,
// reading the held rows of P(t) in place in the state's slot tensors, the new position is
// written into its slot directly (ResolventState::append_slot), and the output projection is one
// more matrix-vector product. The cost per token follows the pattern: O(|P(t)|·D) per head, plus
// the slot bookkeeping of the state (O(|P(t)|) lookups).
//
// It computes the same formulas as ResolventMixer::step (resolvent_mixer.cpp), rope_apply
// (core/rope.cpp), pattern_scores_step (pattern_scores.cpp) and resolvent_step
// (resolvent_op.cpp, the row kernel of resolvent_kernel.h) in the same order, so it equals that
// path to float rounding; tests/resolvent/resolvent_step_rows_test.cpp checks it against the
// ATen step token by token, outputs and state, in float and double.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/resolvent/resolvent_mixer.h"

namespace mixlab {
namespace {

using row::sigmoid;

// Row `slot` of (b,h) slice bh in a (B,H,Cap,E) slot tensor.
template <typename T>
T* slot_row(const torch::Tensor& slots, int64_t bh, int64_t slot) {
  const int64_t cap = slots.size(2), E = slots.size(3);
  return slots.data_ptr<T>() + (bh * cap + slot) * E;
}

}  // namespace

bool ResolventMixer::decodes_on_rows(const torch::Tensor& x_t, const ResolventState& state) const {
  if (torch::GradMode::is_enabled()) return false;
  if (x_t.dim() != 2 || x_t.size(1) != dims_.d_model || !x_t.device().is_cpu()) return false;
  // raw_rows_ok wants a contiguous row: x_t may be a strided time slice, judged by its dtype.
  const auto& w = in_proj_->weight;
  if (!row::raw_rows_ok(w, {&in_proj_->bias, &out_proj_->weight, &out_proj_->bias}, 2)) return false;
  if (shared() && !row::raw_rows_ok(w, {&delta_proj_->weight, &delta_proj_->bias}, 2)) return false;
  if (x_t.scalar_type() != w.scalar_type() || state.dtype() != w.scalar_type()) return false;
  if (state.heads() != heads_ || state.head_dim() != head_dim_) return false;
  const auto want = state_layout();
  const auto& have = state.layout();
  if (have.store_x != want.store_x || have.store_y != want.store_y || have.extra_dims != want.extra_dims) return false;
  // The state may hold a pattern other than the mixer's (the ATen step then reads the state's
  // pattern too); its recurrence must agree with the layout this mixer computes.
  if (state.pattern().recurrent() != pattern_.recurrent()) return false;
  auto slots_ok = [&](const torch::Tensor& t) {
    return !t.defined() || (row::raw_rows_ok(t, {}, 4) && t.scalar_type() == w.scalar_type());
  };
  if (!slots_ok(state.x_slots()) || !slots_ok(state.y_slots())) return false;
  for (size_t k = 0; k < want.extra_dims.size(); ++k)
    if (!slots_ok(state.extra_slots(k))) return false;
  return true;
}

torch::Tensor ResolventMixer::step_rows(ResolventState& state, const torch::Tensor& x_t) {
  auto out = at::empty({x_t.size(0), dims_.d_model}, x_t.options());
  AT_DISPATCH_FLOATING_TYPES(x_t.scalar_type(), "ResolventMixer::step_rows",
                             [&] { step_rows_typed<scalar_t>(state, x_t, out); });
  return out;
}

template <typename T>
void ResolventMixer::step_rows_typed(ResolventState& state, const torch::Tensor& x_t, torch::Tensor& out) {
  const int64_t B = x_t.size(0), C = dims_.d_model, H = heads_, D = head_dim_;
  const int64_t NP = n_proj_ * C, t = state.position();
  const bool recurrent = pattern_.recurrent(), gated = this->gated(), shared = this->shared();
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));

  // P(t), nearest first, and where the state holds each position (the ATen step's order).
  const auto row = state.next_row();  // P(t)
  const int64_t c = static_cast<int64_t>(row.size());
  thread_local std::vector<int64_t> slots;
  slots.resize(row.size());
  for (int64_t s = 0; s < c; ++s) {
    slots[s] = state.slot_of(row[s]);
    MIXLAB_ASSERT(slots[s] >= 0, "state at position {} does not hold position {}", t, row[s]);
  }

  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(B * NP + 2 * B * C + B * H + 2 * (c + 1) + 2 * D));
  T* proj = buf.data();   // (B, NP): [q^A, k^A,] [q^B, k^B,] v [, gate] per row
  T* y = proj + B * NP;   // (B, C): the solve's y_t (what the state stores)
  T* z = y + B * C;       // (B, C): the heads' outputs before out_proj
  T* delta = z + B * C;   // (B, H): δ with shared weights
  T* sa = delta + B * H;  // (c + 1): alpha of one head
  T* sb = sa + (c + 1);   // (c + 1): beta of one head
  T* u = sb + (c + 1);    // (D): A x
  T* w = u + D;           // (D): B y

  // Projections, gate and RoPE, row by row; offsets of the blocks in a projected row.
  int64_t k = 0;
  const int64_t o_qa = shared ? -1 : C * k++, o_ka = shared ? -1 : C * k++;
  const int64_t o_qb = recurrent ? C * k++ : -1, o_kb = recurrent ? C * k++ : -1;
  const int64_t o_v = C * k++, o_g = gated ? C * k++ : -1;
  MIXLAB_ASSERT(k == n_proj_, "in_proj has {} blocks, step_rows read {}", n_proj_, k);
  const T* xp = x_t.data_ptr<T>();
  for (int64_t r = 0; r < B; ++r) {
    T* p = proj + r * NP;
    row::linear<T>(in_proj_->weight.data_ptr<T>(), in_proj_->bias.data_ptr<T>(), xp + r * C, p, NP, C);
    if (gated)
      for (int64_t i = 0; i < C; ++i) p[o_g + i] = sigmoid(p[o_g + i]);
    if (options_.rope)
      for (int64_t o : {o_qa, o_ka, o_qb, o_kb})
        if (o >= 0) rope_rows<T>(p + o, H, D, t, rope_inv_);  // the H heads of this block at position t
    if (shared)
      row::linear<T>(delta_proj_->weight.data_ptr<T>(), delta_proj_->bias.data_ptr<T>(), xp + r * C, delta + r * H, H,
                     C);
  }

  // Scores, softmax and the one-row solve per (b,h), reading the held rows in place.
  const auto& keys_a = shared ? torch::Tensor() : state.extra_slots(static_cast<size_t>(key_channel_a()));
  const auto& keys_b = recurrent ? state.extra_slots(static_cast<size_t>(key_channel_b())) : torch::Tensor();
  const auto& xs = state.x_slots();
  const auto& ys = state.y_slots();
  for (int64_t r = 0; r < B; ++r) {
    const T* p = proj + r * NP;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = r * H + h;
      const T* v = p + o_v + h * D;
      if (!shared) {
        // alpha over {t} ∪ P(t): slot 0 is the diagonal.
        const T* q = p + o_qa + h * D;
        sa[0] = row::dot<T>(q, p + o_ka + h * D, D) * scale;
        for (int64_t s = 0; s < c; ++s) sa[s + 1] = row::dot<T>(q, slot_row<T>(keys_a, bh, slots[s]), D) * scale;
        row::softmax<T>(sa, c + 1);
      } else {
        sa[0] = T(1) + delta[bh];  // A = B·D + D': the diagonal 1 + δ (the solve below adds B y)
      }
      for (int64_t d = 0; d < D; ++d) u[d] = sa[0] * v[d];
      std::fill(w, w + D, T(0));
      if (!shared)
        for (int64_t s = 0; s < c; ++s) row::axpy<T>(sa[s + 1], slot_row<T>(xs, bh, slots[s]), u, D);
      if (recurrent && c > 0) {
        const T* q = p + o_qb + h * D;
        for (int64_t s = 0; s < c; ++s) sb[s] = row::dot<T>(q, slot_row<T>(keys_b, bh, slots[s]), D) * scale;
        row::softmax<T>(sb, c);
        for (int64_t s = 0; s < c; ++s) row::axpy<T>(sb[s], slot_row<T>(ys, bh, slots[s]), w, D);
      }
      T* yh = y + r * C + h * D;
      if (gated) {
        const T* g = p + o_g + h * D;
        for (int64_t d = 0; d < D; ++d) yh[d] = (T(1) - g[d]) * u[d] + g[d] * w[d];
      } else {
        for (int64_t d = 0; d < D; ++d) yh[d] = u[d] + w[d];
      }
      T* zh = z + r * C + h * D;
      if (shared) {
        // y = z − (1 − g) δ x: the A = B·D + D' correction (the state keeps z).
        const T* g = gated ? p + o_g + h * D : nullptr;
        for (int64_t d = 0; d < D; ++d) zh[d] = yh[d] - ((g ? T(1) - g[d] : T(1)) * delta[bh]) * v[d];
      } else {
        std::copy(yh, yh + D, zh);
      }
    }
  }

  // The new position into its slot (after the reads: the slot tensors may grow here).
  const int64_t slot = state.append_slot();
  const auto& layout = state.layout();
  for (int64_t r = 0; r < B; ++r) {
    const T* p = proj + r * NP;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = r * H + h;
      if (layout.store_x) std::copy_n(p + o_v + h * D, D, slot_row<T>(state.x_slots(), bh, slot));
      if (layout.store_y) std::copy_n(y + r * C + h * D, D, slot_row<T>(state.y_slots(), bh, slot));
      if (!shared)
        std::copy_n(p + o_ka + h * D, D,
                    slot_row<T>(state.extra_slots(static_cast<size_t>(key_channel_a())), bh, slot));
      if (recurrent)
        std::copy_n(p + o_kb + h * D, D,
                    slot_row<T>(state.extra_slots(static_cast<size_t>(key_channel_b())), bh, slot));
    }
  }

  T* op = out.data_ptr<T>();
  for (int64_t r = 0; r < B; ++r)
    row::linear<T>(out_proj_->weight.data_ptr<T>(), out_proj_->bias.data_ptr<T>(), z + r * C, op + r * C, C, C);
}

template void ResolventMixer::step_rows_typed<float>(ResolventState&, const torch::Tensor&, torch::Tensor&);
template void ResolventMixer::step_rows_typed<double>(ResolventState&, const torch::Tensor&, torch::Tensor&);

}  // namespace mixlab
