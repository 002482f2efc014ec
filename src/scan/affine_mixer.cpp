// The affine-recurrence layers (mixlab/scan/affine_mixer.h): one table of members, one class
// whose prepare()/finish() hold each member's parametrisation around the two kernels.
#include "mixlab/scan/affine_mixer.h"

#include <cmath>

#include "affine_step.h"
#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {
namespace {

using AK = AffineKernel;
constexpr auto kMembers = std::array<AffineMemberInfo, static_cast<size_t>(AffineMember::kCount)>{{
    {AffineMember::kLinearAttn, "linear_attn", AK::kDiagDecay, true},
    {AffineMember::kRetNet, "retnet", AK::kDiagDecay, false},
    {AffineMember::kGla, "gla", AK::kDiagDecay, false},
    {AffineMember::kMamba, "mamba", AK::kDiagDecay, false},
    {AffineMember::kMlstm, "mlstm", AK::kDiagDecay, true},
    {AffineMember::kGatedRfa, "gated_rfa", AK::kDiagDecay, true},
    {AffineMember::kDeltaNet, "deltanet", AK::kDeltaRule, false},
    {AffineMember::kGatedDeltaNet, "gated_deltanet", AK::kDeltaRule, false},
}};

constexpr bool members_in_order() {
  for (size_t i = 0; i < kMembers.size(); ++i)
    if (static_cast<size_t>(kMembers[i].member) != i) return false;
  return true;
}
static_assert(members_in_order(), "kMembers rows must follow AffineMember order, one row per member");

constexpr int64_t kMambaState = 16;  // N
constexpr int64_t kGlaGateRank = 16;

// (B,T,H*D) -> (B,H,T,D)
torch::Tensor heads_first(const torch::Tensor& t, int64_t H) {
  return t.reshape({t.size(0), t.size(1), H, -1}).permute({0, 2, 1, 3});
}

torch::Tensor l2_normalise(const torch::Tensor& t) { return t / t.pow(2).sum(-1, true).add(1e-6).sqrt(); }

torch::Tensor rms_norm(const torch::Tensor& t) {  // over the last dim, no affine
  return t * torch::rsqrt(t.pow(2).mean(-1, true) + 1e-6);
}

torch::Tensor with_ones_column(const torch::Tensor& v) {
  return torch::cat({v, torch::ones_like(v.narrow(-1, 0, 1))}, -1);
}

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
  heads_ = H;
  dv_ = C / H;
  dk_ = member == AffineMember::kMamba ? kMambaState : dv_;
  auto linear = [&](const char* n, int64_t in, int64_t out, bool bias) {
    return register_module(n, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  };
  q_proj_ = linear("q_proj", C, H * dk_, false);
  k_proj_ = linear("k_proj", C, H * dk_, false);
  v_proj_ = linear("v_proj", C, H * dv_, false);
  o_proj_ = linear("o_proj", H * dv_, C, false);
  torch::NoGradGuard no_grad;
  switch (member) {
    case AffineMember::kLinearAttn:
    case AffineMember::kDeltaNet:
      break;
    case AffineMember::kRetNet: {
      gate_proj_ = linear("gate_proj", C, H * dv_, false);
      // gamma_h = 1 - 2^(-5 - 4 h/(H-1)): from 1 - 1/32 to 1 - 1/512 (RetNet's head schedule).
      auto h = H > 1 ? torch::arange(H, torch::kDouble) / double(H - 1) : torch::zeros({1}, torch::kDouble);
      retnet_log_gamma_ =
          register_buffer("log_gamma", torch::log1p(-torch::pow(2.0, -5.0 - 4.0 * h)).to(torch::kFloat));
      break;
    }
    case AffineMember::kGla:
      gate_proj_ = linear("gate_proj", C, H * dv_, false);
      decay_proj_ = linear("decay_proj1", C, kGlaGateRank, false);
      decay_proj2_ = linear("decay_proj2", kGlaGateRank, H * dk_, true);
      break;
    case AffineMember::kMamba: {
      gate_proj_ = linear("gate_proj", C, H * dv_, false);  // z
      aux_proj_ = linear("dt_proj", C, H, false);           // Δ
      a_log_ = register_parameter("A_log", torch::log(torch::arange(1, kMambaState + 1, torch::kFloat)).repeat({H, 1}));
      d_skip_ = register_parameter("D", torch::ones({H, dv_}));
      // Mamba's Δ init: softplus(dt_bias) log-uniform in [1e-3, 1e-1].
      auto dt = torch::exp(torch::rand({H}) * (std::log(0.1) - std::log(1e-3)) + std::log(1e-3));
      dt_bias_ = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));
      break;
    }
    case AffineMember::kMlstm:
      gate_proj_ = linear("out_gate_proj", C, H * dv_, false);
      decay_proj_ = linear("forget_proj", C, H, true);
      decay_proj_->bias.fill_(3.0);  // forget gates start near 1 (sigmoid(3) = 0.95)
      aux_proj_ = linear("input_proj", C, H, true);
      break;
    case AffineMember::kGatedRfa:
      decay_proj_ = linear("gate_proj", C, H, true);
      rfa_w_ = register_buffer("random_features", torch::randn({H, dk_, dk_}));
      break;
    case AffineMember::kGatedDeltaNet:
      gate_proj_ = linear("gate_proj", C, H * dv_, false);
      decay_proj_ = linear("alpha_proj", C, H, false);
      aux_proj_ = linear("beta_proj", C, H, true);
      a_log_ = register_parameter("A_log", torch::log(torch::empty({H}).uniform_(1, 16)));
      dt_bias_ = register_parameter("dt_bias", torch::zeros({H}));
      break;
    case AffineMember::kCount:
      MIXLAB_ASSERT(false, "kCount is not a member");
  }
  if (member == AffineMember::kDeltaNet) aux_proj_ = linear("beta_proj", C, H, true);
}

std::string AffineMixer::spec() const {
  return chunk_ == 64 ? std::string(info().name) : std::string(info().name) + ":" + std::to_string(chunk_);
}

torch::Tensor AffineMixer::fused_projection(const torch::Tensor& x) {
  std::vector<torch::Tensor> ws = {q_proj_->weight, k_proj_->weight, v_proj_->weight};
  if (gate_proj_) ws.push_back(gate_proj_->weight);
  std::vector<int64_t> versions;
  for (const auto& w : ws) versions.push_back(w._version());
  if (!fused_w_.defined() || versions != fused_versions_ || fused_w_.scalar_type() != x.scalar_type()) {
    torch::NoGradGuard no_grad;
    fused_w_ = torch::cat(ws, 0).to(x.scalar_type()).t().contiguous();  // (C, N): x @ W
    fused_versions_ = versions;
  }
  return at::matmul(x, fused_w_);
}

AffineMixer::Prepared AffineMixer::prepare(const torch::Tensor& x, const torch::Tensor& fused) {
  const int64_t H = heads_;
  Prepared p;
  // Projection outputs: from the fused decode matmul (narrowed) or one Linear each.
  const int64_t nq = H * dk_, nv = H * dv_;
  auto lin = [&](torch::nn::Linear& m, int64_t offset, int64_t n) {
    return fused.defined() ? fused.narrow(-1, offset, n) : m->forward(x);
  };
  auto q = heads_first(lin(q_proj_, 0, nq), H), k = heads_first(lin(k_proj_, nq, nq), H);
  auto v = heads_first(lin(v_proj_, 2 * nq, nv), H);  // (B,H,T,Dv)
  auto gate_lin = [&]() { return lin(gate_proj_, 2 * nq + nv, nv); };
  const auto B = x.size(0), T = x.size(1);
  auto per_head = [&](const torch::Tensor& t) { return t.permute({0, 2, 1}); };  // (B,T,H) -> (B,H,T)
  auto expand_keys = [&](const torch::Tensor& t) { return t.unsqueeze(-1).expand({B, H, T, dk_}); };
  const double scale = 1.0 / std::sqrt(double(dk_));
  switch (member_) {
    case AffineMember::kLinearAttn:
      p.q = torch::elu(q) + 1;
      p.k = torch::elu(k) + 1;
      p.v = with_ones_column(v);
      p.g = torch::zeros({B, H, T, 1}, x.options()).expand({B, H, T, dk_});
      break;
    case AffineMember::kRetNet:
      p.q = q * scale;
      p.k = k;
      p.v = v;
      p.g = retnet_log_gamma_.to(x.scalar_type()).view({1, H, 1, 1}).expand({B, H, T, dk_});
      p.gate = torch::silu(gate_lin()).reshape({B, T, H, dv_});
      break;
    case AffineMember::kGla:
      p.q = q * scale;
      p.k = k;
      p.v = v;
      p.g = heads_first(torch::log_sigmoid(decay_proj2_->forward(decay_proj_->forward(x))), H) / kGlaDecayNormaliser;
      p.gate = torch::silu(gate_lin()).reshape({B, T, H, dv_});
      break;
    case AffineMember::kMamba: {
      auto u = torch::silu(v);                                                   // (B,H,T,D)
      auto delta = per_head(torch::softplus(aux_proj_->forward(x) + dt_bias_));  // (B,H,T)
      auto a = -torch::exp(a_log_);                                              // (H,N)
      p.q = q;                                                                   // C_t
      p.k = delta.unsqueeze(-1) * k;                                             // Δ_t B_t
      p.v = u;
      p.g = delta.unsqueeze(-1) * a.view({1, H, 1, dk_});
      p.gate = torch::silu(gate_lin()).reshape({B, T, H, dv_});
      p.skip = u.permute({0, 2, 1, 3}) * d_skip_;  // (B,T,H,D)
      break;
    }
    case AffineMember::kMlstm: {
      auto input = per_head(torch::sigmoid(aux_proj_->forward(x)));  // (B,H,T)
      p.q = q * scale;
      p.k = k * input.unsqueeze(-1);
      p.v = with_ones_column(v);
      p.g = expand_keys(per_head(torch::log_sigmoid(decay_proj_->forward(x))));
      p.gate = torch::sigmoid(gate_lin()).reshape({B, T, H, dv_});
      break;
    }
    case AffineMember::kGatedRfa: {
      auto w = rfa_w_.to(x.scalar_type()).unsqueeze(0);  // (1,H,m,Dk)
      auto phi = [&](const torch::Tensor& t) {
        return torch::exp(torch::matmul(l2_normalise(t), w.transpose(-1, -2)) - 0.5) * (1.0 / std::sqrt(double(dk_)));
      };
      auto logit = per_head(decay_proj_->forward(x));  // (B,H,T)
      p.q = phi(q);
      p.k = phi(k) * torch::sigmoid(-logit).unsqueeze(-1);  // (1 - g_t) phi(k_t)
      p.v = with_ones_column(v);
      p.g = expand_keys(torch::log_sigmoid(logit));
      break;
    }
    case AffineMember::kDeltaNet:
    case AffineMember::kGatedDeltaNet:
      p.q = l2_normalise(torch::silu(q)) * scale;
      p.k = l2_normalise(torch::silu(k));
      p.v = v;
      p.beta = per_head(torch::sigmoid(aux_proj_->forward(x)));
      if (member_ == AffineMember::kGatedDeltaNet) {
        p.log_alpha = per_head(-torch::exp(a_log_) * torch::softplus(decay_proj_->forward(x) + dt_bias_));
        p.gate = torch::silu(gate_lin()).reshape({B, T, H, dv_});
      }
      break;
    case AffineMember::kCount:
      MIXLAB_ASSERT(false, "kCount is not a member");
  }
  return p;
}

torch::Tensor AffineMixer::finish(const Prepared& p, const torch::Tensor& o) {
  auto y = o.permute({0, 2, 1, 3});  // (B,T,H,Dv')
  switch (member_) {
    case AffineMember::kLinearAttn:
    case AffineMember::kGatedRfa:
      y = y.narrow(-1, 0, dv_) / (y.narrow(-1, dv_, 1) + 1e-6);
      break;
    case AffineMember::kMlstm:
      y = y.narrow(-1, 0, dv_) / torch::clamp_min(y.narrow(-1, dv_, 1).abs(), 1.0) * p.gate;
      break;
    case AffineMember::kMamba:
      y = (y + p.skip) * p.gate;
      break;
    case AffineMember::kRetNet:
    case AffineMember::kGla:
    case AffineMember::kGatedDeltaNet:
      y = rms_norm(y) * p.gate;
      break;
    case AffineMember::kDeltaNet:
      y = rms_norm(y);
      break;
    case AffineMember::kCount:
      MIXLAB_ASSERT(false, "kCount is not a member");
  }
  return o_proj_->forward(y.reshape({y.size(0), y.size(1), heads_ * dv_}));
}

AffineResult AffineMixer::run(const Prepared& p, const torch::Tensor& s0) {
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
