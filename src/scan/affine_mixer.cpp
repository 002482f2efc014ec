// The affine-recurrence layers (mixlab/scan/affine_mixer.h): one table of members, each row
// pointing at its member's file (src/scan/affine_member_<name>.cpp, interface in
// affine_member.h), and one class that runs any member: the shared q/k/v/o projections, the
// kernel of the member's row, the state and the decode paths, calling the member's file for its
// parameters, prepare() and finish().
#include "mixlab/scan/affine_mixer.h"

#include <cmath>

#include "affine_member.h"
#include "affine_step.h"
#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

namespace am = detail::affine_member;  // affine_member.h
namespace {

using AK = AffineKernel;
// The member table: one row per member, in enum order; `impl` is the member's file.
constexpr auto kMembers = std::array<AffineMemberInfo, static_cast<size_t>(AffineMember::kCount)>{{
    {AffineMember::kLinearAttn, "linear_attn", AK::kDiagDecay, true, &am::kAffineMemberLinearAttn},
    {AffineMember::kRetNet, "retnet", AK::kDiagDecay, false, &am::kAffineMemberRetNet},
    {AffineMember::kGla, "gla", AK::kDiagDecay, false, &am::kAffineMemberGla},
    {AffineMember::kMamba, "mamba", AK::kDiagDecay, false, &am::kAffineMemberMamba},
    {AffineMember::kMlstm, "mlstm", AK::kDiagDecay, true, &am::kAffineMemberMlstm},
    {AffineMember::kGatedRfa, "gated_rfa", AK::kDiagDecay, true, &am::kAffineMemberGatedRfa},
    {AffineMember::kDeltaNet, "deltanet", AK::kDeltaRule, false, &am::kAffineMemberDeltaNet},
    {AffineMember::kGatedDeltaNet, "gated_deltanet", AK::kDeltaRule, false, &am::kAffineMemberGatedDeltaNet},
}};

// The address of another file's member object is not a constant under -fsanitize=address, so
// the compile-time check is the order; that every row has its impl is checked by
// tests/scan/affine_member_test.cpp (AffineMemberTable.*).
constexpr bool members_in_order() {
  for (size_t i = 0; i < kMembers.size(); ++i)
    if (static_cast<size_t>(kMembers[i].member) != i) return false;
  return true;
}
static_assert(members_in_order(), "kMembers rows must follow AffineMember order, one row per member");

}  // namespace

const std::array<AffineMemberInfo, static_cast<size_t>(AffineMember::kCount)>& affine_members() { return kMembers; }

const AffineMemberInfo& affine_member_info(AffineMember member) {
  const auto i = static_cast<size_t>(member);
  MIXLAB_ASSERT(i < kMembers.size(), "affine member {} out of range", i);
  return kMembers[i];
}

AffineMixer::AffineMixer(AffineMember member, const MixerDims& dims, int64_t chunk)
    : member_(member), dims_(dims), chunk_(chunk) {
  const char* name = info().name;
  const int64_t C = dims.d_model, H = dims.n_heads;
  MIXLAB_CHECK(C > 0 && H > 0 && C % H == 0, "{}: d_model ({}) must be a positive multiple of n_heads ({})", name, C,
               H);
  MIXLAB_CHECK(chunk >= 1, "{}: chunk must be >= 1, got {}", name, chunk);
  if (info().kernel == AK::kDiagDecay)
    MIXLAB_CHECK((chunk & (chunk - 1)) == 0, "{}: chunk must be a power of two, got {}", name, chunk);
  const am::AffineMemberDef& impl = *info().impl;
  heads_ = H;
  dv_ = C / H;
  dk_ = impl.state_dk > 0 ? impl.state_dk : dv_;
  using am::affine_linear;
  q_proj_ = affine_linear(*this, "q_proj", C, H * dk_, false);
  k_proj_ = affine_linear(*this, "k_proj", C, H * dk_, false);
  v_proj_ = affine_linear(*this, "v_proj", C, H * dv_, false);
  o_proj_ = affine_linear(*this, "o_proj", H * dv_, C, false);
  // The member's parameters, registered after q/k/v/o (their names and order, and the RNG draws
  // of their init, are the member file's: checkpoints depend on them).
  torch::NoGradGuard no_grad;
  impl_ = impl.build(*this, {C, H, dk_, dv_});
}

MixerCostFigures AffineMixer::cost_figures(int64_t T) const {
  (void)T;
  MixerCostFigures f;
  f.equivalent_pattern = "order:1";
  f.structure = std::string(info().name) + " (graph of order:1)";
  f.basis = "the graph of order:1: S_t reads S_{t-1} and x_t only; the one cached position is the d_k x d_v state";
  return f;
}

std::string AffineMixer::spec() const {
  return chunk_ == 64 ? std::string(info().name) : std::string(info().name) + ":" + std::to_string(chunk_);
}

torch::Tensor AffineMixer::fused_projection(const torch::Tensor& x) {
  std::vector<torch::Tensor> ws = {q_proj_->weight, k_proj_->weight, v_proj_->weight};
  if (impl_->gate_proj) ws.push_back(impl_->gate_proj->weight);
  std::vector<int64_t> versions;
  for (const auto& w : ws) versions.push_back(w._version());
  if (!fused_w_.defined() || versions != fused_versions_ || fused_w_.scalar_type() != x.scalar_type()) {
    torch::NoGradGuard no_grad;
    fused_w_ = torch::cat(ws, 0).to(x.scalar_type()).t().contiguous();  // (C, N): x @ W
    fused_versions_ = versions;
  }
  return at::matmul(x, fused_w_);
}

am::AffinePrepared AffineMixer::prepare(const torch::Tensor& x, const torch::Tensor& fused) {
  const int64_t H = heads_;
  // Projection outputs: from the fused decode matmul (narrowed) or one Linear each.
  const int64_t nq = H * dk_, nv = H * dv_;
  auto lin = [&](torch::nn::Linear& m, int64_t offset, int64_t n) {
    return fused.defined() ? fused.narrow(-1, offset, n) : m->forward(x);
  };
  using am::heads_first;
  const am::AffineProjected in{x,
                               heads_first(lin(q_proj_, 0, nq), H),
                               heads_first(lin(k_proj_, nq, nq), H),
                               heads_first(lin(v_proj_, 2 * nq, nv), H),  // (B,H,T,Dv)
                               x.size(0),
                               x.size(1),
                               1.0 / std::sqrt(double(dk_)),
                               [&] { return lin(impl_->gate_proj, 2 * nq + nv, nv); }};
  return impl_->prepare(in);
}

torch::Tensor AffineMixer::finish(const am::AffinePrepared& p, const torch::Tensor& o) {
  auto y = impl_->finish(p, o.permute({0, 2, 1, 3}));  // (B,T,H,Dv') -> (B,T,H,Dv)
  return o_proj_->forward(y.reshape({y.size(0), y.size(1), heads_ * dv_}));
}

AffineResult AffineMixer::run(const am::AffinePrepared& p, const torch::Tensor& s0) {
  if (info().kernel == AK::kDiagDecay) {
    switch (form_) {
      case AffineForm::kChunked:
        return diag_decay_chunked(p.q, p.k, p.v, p.g, s0, chunk_);
      case AffineForm::kRecurrent:
        return diag_decay_recurrent(p.q, p.k, p.v, p.g, s0);
      case AffineForm::kScan:
        return diag_decay_scan_form(p.q, p.k, p.v, p.g, s0);
      case AffineForm::kReference:
        return diag_decay_reference(p.q, p.k, p.v, p.g, s0);
    }
  } else {
    switch (form_) {
      case AffineForm::kChunked:
        return delta_rule_chunked(p.q, p.k, p.v, p.beta, p.log_alpha, s0, chunk_);
      case AffineForm::kRecurrent:
        return delta_rule_recurrent(p.q, p.k, p.v, p.beta, p.log_alpha, s0);
      case AffineForm::kScan:
        return delta_rule_scan_form(p.q, p.k, p.v, p.beta, p.log_alpha, s0);
      case AffineForm::kReference:
        return delta_rule_reference(p.q, p.k, p.v, p.beta, p.log_alpha, s0);
    }
  }
  MIXLAB_ASSERT(false, "unknown AffineForm {}", static_cast<int>(form_));
  return {};
}

torch::Tensor AffineMixer::forward_from(const torch::Tensor& x, const torch::Tensor& initial_state,
                                        torch::Tensor* final_state) {
  const std::string fn = std::string(info().name) + " forward";
  check_shape(fn.c_str(), "x", x, {-1, -1, dims_.d_model}, "(B,T,C)");
  check_floating(fn.c_str(), "x", x);
  check_cpu(fn.c_str(), "x", x);
  if (initial_state.defined()) {
    check_shape(fn.c_str(), "initial_state", initial_state, {x.size(0), heads_, dk_, state_dv()}, "(B,H,Dk,Dv)");
    check_same_dtype(fn.c_str(), "initial_state", initial_state, "x", x);
  }
  auto p = prepare(x);
  auto r = run(p, initial_state);
  if (final_state) *final_state = r.final_state;
  return finish(p, r.out);
}

torch::Tensor AffineMixer::forward(const torch::Tensor& x) { return forward_from(x, {}, nullptr); }

torch::Tensor AffineMixer::prefill(MixerState& state_base, const torch::Tensor& x) {
  const std::string fn = std::string(info().name) + " prefill";
  auto* state = dynamic_cast<AffineState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{}: state was not created by this mixer's init_state", fn);
  check_shape(fn.c_str(), "x", x, {state->s_.size(0), -1, dims_.d_model}, "(B,T,C)");
  MIXLAB_CHECK(x.size(1) >= 1, "{}: x must have T >= 1, got {}", fn, shape_string(x));
  torch::Tensor final_state;
  auto y = forward_from(x, state->s_, &final_state);
  state->s_ = final_state.detach();
  state->pos_ += x.size(1);
  return y;
}

std::unique_ptr<MixerState> AffineMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "{} init_state: batch must be > 0, got {}", info().name, batch);
  auto dtype = o_proj_->weight.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return std::make_unique<AffineState>(
      torch::zeros({batch, heads_, dk_, state_dv()}, torch::TensorOptions().dtype(dtype)));
}

torch::Tensor AffineMixer::step(MixerState& state_base, const torch::Tensor& x_t) {
  const std::string fn = std::string(info().name) + " step";
  auto* state = dynamic_cast<AffineState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "{}: state was not created by this mixer's init_state", fn);
  check_shape(fn.c_str(), "x_t", x_t, {state->s_.size(0), dims_.d_model}, "(B,C)");
  check_same_dtype(fn.c_str(), "x_t", x_t, "the state", state->s_);
  // Decode without autograd on contiguous float/double CPU rows: the raw-row step
  // (affine_mixer_step_rows.cpp), equal to the ATen path below to float rounding.
  if (rows_ready(x_t, state->s_)) return step_rows(*state, x_t.contiguous());
  // Decode: one matmul for all input projections when no gradient is wanted (dispatch, not
  // arithmetic, dominates a d = 64 step).
  auto x1 = x_t.unsqueeze(1);
  auto p = torch::GradMode::is_enabled() ? prepare(x1) : prepare(x1, fused_projection(x1));
  AffineStep st;
  if (info().kernel == AK::kDiagDecay) {
    st = detail::diag_decay_step_unchecked(state->s_, p.q.select(2, 0), p.k.select(2, 0), p.v.select(2, 0),
                                           p.g.select(2, 0));
  } else {
    st = detail::delta_rule_step_unchecked(state->s_, p.q.select(2, 0), p.k.select(2, 0), p.v.select(2, 0),
                                           p.beta.select(2, 0),
                                           p.log_alpha.defined() ? p.log_alpha.select(2, 0) : torch::Tensor());
  }
  state->s_ = st.state;
  ++state->pos_;
  return finish(p, st.out.unsqueeze(2)).squeeze(1);
}

MixerPtr affine_mixer_create(const std::string& name, const std::string& spec, const std::string& args,
                             const MixerDims& dims) {
  for (const auto& row : kMembers) {
    if (name != row.name) continue;
    const int64_t chunk =
        SpecArgs(mixer_spec_context(spec), name, args, {}, 1).positional_integer(0, "chunk", 64, 1, 999999);
    return std::make_shared<AffineMixer>(row.member, dims, chunk);
  }
  MIXLAB_FAIL("mixer spec '{}': '{}' is not an affine member", spec, name);
}

}  // namespace mixlab
