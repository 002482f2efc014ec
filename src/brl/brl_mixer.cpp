// BRL-Attention: F_gen (the local mixer) + compressed tokens (F_comp, evolution, F_prop).
// Forward runs all blocks at once (per-layer history reading, see brl_mixer.h); step recomputes
// the compressed tokens at each block boundary from the last hist inputs it has buffered.
#include "mixlab/brl/brl_mixer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixlab/attention/block_attention.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/mixer/parameter_budget.h"

namespace mixlab {
namespace {

const char* attn_name(BrlAttn a) {
  switch (a) {
    case BrlAttn::kSoftmax:
      return "softmax";
    case BrlAttn::kLaplace:
      return "laplace";
    case BrlAttn::kRelu2:
      return "relu2";
  }
  return "?";
}

// (...,L,H*D) -> (...,H,L,D)
torch::Tensor split_heads(const torch::Tensor& t, int64_t H) {
  auto sizes = t.sizes().vec();
  const int64_t D = sizes.back() / H;
  sizes.back() = H;
  sizes.push_back(D);
  return t.reshape(sizes).transpose(-2, -3);
}

// (...,H,L,D) -> (...,L,H*D)
torch::Tensor merge_heads(const torch::Tensor& t) {
  auto u = t.transpose(-2, -3);
  auto sizes = u.sizes().vec();
  const int64_t HD = sizes[sizes.size() - 2] * sizes.back();
  sizes.pop_back();
  sizes.back() = HD;
  return u.reshape(sizes);
}

// The history each block compresses, for a per-block tensor p (B,K,N,C') and h = hist / N history
// blocks: block k (1..K-1) reads blocks max(0, k-h)..k-1. Blocks 1..h-1 have shorter histories
// and come one at a time; blocks h..K-1 share the full length and come as one batch.
struct HistoryPiece {
  int64_t first, count;  // query blocks first..first+count-1
  torch::Tensor rows;    // (B,count,len,C'): each block's history, oldest first
};

std::vector<HistoryPiece> history_pieces(const torch::Tensor& p, int64_t h) {
  const int64_t B = p.size(0), K = p.size(1), N = p.size(2), Cp = p.size(3);
  std::vector<HistoryPiece> pieces;
  for (int64_t k = 1; k < std::min(h, K); ++k) pieces.push_back({k, 1, p.narrow(1, 0, k).reshape({B, 1, k * N, Cp})});
  if (K > h) {
    std::vector<torch::Tensor> parts;  // part j: block k-h+j for every k = h..K-1
    for (int64_t j = 0; j < h; ++j) parts.push_back(p.narrow(1, j, K - h));
    pieces.push_back({h, K - h, h == 1 ? parts[0] : torch::cat(parts, 2)});
  }
  return pieces;
}

// map(rows) for memory rows (...,M,C). The first layer's memory is ct0 expanded over (B,K) with
// stride 0 (memory_init): the map of ct0's M rows, expanded, is the same tensor without B·K
// copies of the product (comp_q and evolve_m each cost as much as a map of the layer's input).
// A leading dim of size 1 (one block, or a decode batch of 1) is collapsed the same way.
torch::Tensor map_rows(torch::nn::Linear& map, const torch::Tensor& rows) {
  torch::Tensor base = rows;
  while (base.dim() > 2 && base.size(0) > 0 && (base.stride(0) == 0 || base.size(0) == 1)) base = base.select(0, 0);
  if (base.dim() > 2) return map(rows);
  auto sizes = rows.sizes().vec();
  sizes.back() = map->options.out_features();
  return map(base).expand(sizes);
}

}  // namespace

void BrlState::io(StateArchive& ar) {
  ar.scalar("position", pos);
  ar.nested("local", *local);
  ar.tensor("block_inputs", block_inputs);
  ar.tensor("prop_k", prop_k);
  ar.tensor("prop_v", prop_v);
  MIXLAB_CHECK(local->position() == pos, "brl state: local window at position {}, the state at {}", local->position(),
               pos);
}

int64_t BrlState::bytes() const {
  return local->bytes() + tensor_bytes(block_inputs) + tensor_bytes(prop_k) + tensor_bytes(prop_v);
}

double brl_parameter_count(const MixerDims& dims, const BrlOptions& options) {
  // The constructor's tensors below, one term each.
  const double C = static_cast<double>(dims.d_model), H = static_cast<double>(dims.n_heads);
  double n = 4 * C * C;                         // local attention: qkv, out
  n += static_cast<double>(options.slots) * C;  // ct0
  n += 3 * C * C;                               // comp_q, comp_k1, comp_v
  if (options.diff) n += C * C + 3 * H;         // comp_k2, gamma_q, gamma_k1, gamma_k2
  n += 2 * C + 2 * C + C * C;                   // comp_norm, evolve_norm, evolve_m
  n += 3 * C * C + H + 2 * C;                   // prop_q, prop_k, prop_v, lambda, prop_norm
  return n;
}

BrlMixer::BrlMixer(const MixerDims& dims, const BrlOptions& options) : dims_(dims), opt_(options) {
  if (opt_.block == 0) opt_.block = opt_.window;
  if (opt_.hist == 0) opt_.hist = opt_.block;
  MIXLAB_CHECK(opt_.window > 0 && opt_.slots > 0 && opt_.block > 0,
               "brl: w, m and block must be > 0, got w={}, m={}, block={}", opt_.window, opt_.slots, opt_.block);
  MIXLAB_CHECK(opt_.hist > 0 && opt_.hist % opt_.block == 0,
               "brl: hist must be a positive multiple of block ({}), got {}", opt_.block, opt_.hist);
  MIXLAB_CHECK(opt_.beta >= 0.0 && opt_.beta <= 1.0, "brl: beta must be in [0, 1], got {}", opt_.beta);
  check_mixer_parameter_budget("brl", brl_parameter_count(dims, opt_), dims.d_model,
                               fmt::format("the slot count m (got {})", opt_.slots));
  local_ = register_module("local", std::make_shared<AttentionMixer>(dims, opt_.window));  // checks C, H
  const int64_t C = dims.d_model, H = dims.n_heads;
  head_dim_ = C / H;
  auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
    return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  };
  ct0_ = register_parameter("ct0", torch::randn({opt_.slots, C}));
  comp_q_ = linear("comp_q", C, C, false);
  comp_k1_ = linear("comp_k1", C, C, false);
  comp_v_ = linear("comp_v", C, C, false);
  if (opt_.diff) {
    comp_k2_ = linear("comp_k2", C, C, false);
    gamma_q_ = register_parameter("gamma_q", torch::randn({H}) * 0.1);
    gamma_k1_ = register_parameter("gamma_k1", torch::randn({H}) * 0.1);
    gamma_k2_ = register_parameter("gamma_k2", torch::randn({H}) * 0.1);
  }
  comp_norm_ = register_module("comp_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(H, C)));
  evolve_norm_ = register_module("evolve_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  evolve_m_ = linear("evolve_m", C, C, false);
  prop_q_ = linear("prop_q", C, C, false);
  prop_k_ = linear("prop_k", C, C, false);
  prop_v_ = linear("prop_v", C, C, false);
  lambda_ = register_parameter("lambda", torch::full({H}, opt_.lambda));
  prop_norm_ = register_module("prop_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
}

std::string BrlMixer::spec() const {
  // hist only when it is not the default (one block): saved states and checkpoints name their
  // mixer by this string, and those written before hist existed must keep loading.
  const std::string hist = opt_.hist == opt_.block ? "" : fmt::format(":hist={}", opt_.hist);
  return fmt::format("brl:w={}:m={}:block={}{}:beta={}:lambda={}:attn={}:diff={}", opt_.window, opt_.slots, opt_.block,
                     hist, opt_.beta, opt_.lambda, attn_name(opt_.attn), opt_.diff ? 1 : 0);
}

torch::Tensor BrlMixer::gamma() const {
  if (!opt_.diff) return torch::zeros({dims_.n_heads}, ct0_.options().requires_grad(false));
  return torch::exp(gamma_q_ * gamma_k1_) - torch::exp(gamma_q_ * gamma_k2_);
}

torch::Tensor BrlMixer::attn_weights(const torch::Tensor& scores) const {
  const double n = static_cast<double>(scores.size(-1));
  switch (opt_.attn) {
    case BrlAttn::kSoftmax:
      return scores.softmax(-1);
    case BrlAttn::kLaplace: {
      // Mega's Laplace attention: an erf ramp approximating relu² near 0; averaged over the keys
      // (rather than summed) so its scale does not grow with the number of keys.
      const double mu = std::sqrt(0.5), sigma = std::sqrt(1.0 / (4.0 * M_PI));
      return 0.5 * (1.0 + torch::erf((scores - mu) / (sigma * std::sqrt(2.0)))) / n;
    }
    case BrlAttn::kRelu2:
      return torch::relu(scores).pow(2) / n;
  }
  MIXLAB_ASSERT(false, "unhandled BrlAttn");
  return {};
}

torch::Tensor BrlMixer::compress(const torch::Tensor& ct, const torch::Tensor& history) {
  const int64_t H = dims_.n_heads;
  const double scale = 1.0 / (static_cast<double>(opt_.slots) * std::sqrt(static_cast<double>(dims_.d_model)));
  auto q = split_heads(map_rows(comp_q_, ct), H);                         // (...,H,M,D)
  auto k1 = split_heads(comp_k1_(history), H);                            // (...,H,N,D)
  auto v = split_heads(comp_v_(history), H);                              // (...,H,N,D)
  auto s = attn_weights(torch::matmul(q, k1.transpose(-1, -2)) * scale);  // (...,H,M,N)
  if (opt_.diff) {
    auto k2 = split_heads(comp_k2_(history), H);
    auto s2 = attn_weights(torch::matmul(q, k2.transpose(-1, -2)) * scale);
    s = s - gamma().view({H, 1, 1}) * s2;
  }
  return comp_normed(merge_heads(torch::matmul(s, v)));  // (...,M,C)
}

torch::Tensor BrlMixer::comp_normed(const torch::Tensor& rows) const {
  // Group norm per head (one group per head's D channels) over each compressed token, written as
  // a layer norm over (...,H,D): LibTorch 1.13's group norm took 1.7x the time forward+backward
  // at MAD's model (2048 rows of 16 groups of 8), for equal results.
  const int64_t H = dims_.n_heads;
  const auto normed =
      torch::layer_norm(rows.reshape({-1, H, head_dim_}), {head_dim_}, {}, {}, comp_norm_->options.eps());
  return torch::addcmul(comp_norm_->bias, normed.view(rows.sizes()), comp_norm_->weight);
}

torch::Tensor BrlMixer::evolve(const torch::Tensor& ct, const torch::Tensor& ct_bar) {
  return (1.0 - opt_.beta) * evolve_norm_(ct_bar) + opt_.beta * map_rows(evolve_m_, ct);
}

std::pair<torch::Tensor, torch::Tensor> BrlMixer::prop_keys_values(const torch::Tensor& ct_out) {
  return {split_heads(prop_k_(ct_out), dims_.n_heads), split_heads(prop_v_(ct_out), dims_.n_heads)};
}

torch::Tensor BrlMixer::propagate(const torch::Tensor& x, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t H = dims_.n_heads;
  auto q = split_heads(prop_q_(x), H);  // (...,H,T,D)
  auto s = attn_weights(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_)));
  auto out = merge_heads(lambda_.view({H, 1, 1}) * torch::matmul(s, v));  // (...,T,C)
  return torch::relu(prop_norm_(out));
}

torch::Tensor BrlMixer::memory_init(int64_t batch, int64_t T) {
  MIXLAB_CHECK(batch > 0 && T > 0, "brl memory_init: batch and T must be > 0, got {} and {}", batch, T);
  return ct0_.expand({batch, blocks_for(T), opt_.slots, dims_.d_model});
}

torch::Tensor BrlMixer::memory_init_step(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "brl memory_init_step: batch must be > 0, got {}", batch);
  return ct0_.expand({batch, opt_.slots, dims_.d_model});
}

MemoryOutput BrlMixer::forward_softmax(const torch::Tensor& xb, const torch::Tensor& memory) {
  const int64_t B = xb.size(0), K = xb.size(1), N = xb.size(2), C = dims_.d_model, M = opt_.slots;
  const int64_t H = dims_.n_heads, D = head_dim_;
  // The maps of the layer's input in one product: F_comp's keys (K1, K2) and values over the
  // history (only with K > 1: a single block has none) and F_prop's queries, (B,K,N,n·C) for n
  // maps. Each is a strided view; every block is a history.
  std::vector<torch::Tensor> maps;
  if (K > 1) {
    maps.push_back(comp_k1_->weight);
    if (opt_.diff) maps.push_back(comp_k2_->weight);
    maps.push_back(comp_v_->weight);
  }
  maps.push_back(prop_q_->weight);
  // split, not narrow: the backward of split is one cat of the parts' gradients, that of each
  // narrow a zero-filled (B,K,N,n·C) tensor, summed.
  const auto parts = torch::matmul(xb, torch::cat(maps, 0).t()).split(C, -1);
  auto part = [&](size_t i, int64_t len) { return parts[i].reshape({B * K, len, H, D}); };
  torch::Tensor ct_bar = memory;
  const int64_t h = opt_.hist / N;
  if (K > 1 && h > 1) {
    // F_comp over h history blocks: the pieces of history_pieces, each one batch of groups.
    const double scale = 1.0 / (static_cast<double>(M) * std::sqrt(static_cast<double>(C)));
    const auto q_all = map_rows(comp_q_, memory.narrow(1, 1, K - 1));  // (B,K-1,M,C)
    const size_t iv = opt_.diff ? 2 : 1;
    const auto k1 = history_pieces(parts[0], h), v = history_pieces(parts[iv], h);
    std::vector<HistoryPiece> k2;
    torch::Tensor gamma_h;  // γ per head, once for every piece
    if (opt_.diff) {
      k2 = history_pieces(parts[1], h);
      gamma_h = gamma().view({H, 1});
    }
    std::vector<torch::Tensor> outs;
    for (size_t i = 0; i < k1.size(); ++i) {
      const int64_t G = B * k1[i].count, len = k1[i].rows.size(2);
      auto q = q_all.narrow(1, k1[i].first - 1, k1[i].count).reshape({G, M, H, D});
      auto rows = [&](const HistoryPiece& piece) { return piece.rows.reshape({G, len, H, D}); };
      auto out = block_attention(q, rows(k1[i]), rows(v[i]), scale);  // (G,M,H,D)
      if (opt_.diff) out = out - gamma_h * block_attention(q, rows(k2[i]), rows(v[i]), scale);
      outs.push_back(out.reshape({B, k1[i].count, M, C}));
    }
    auto comp = comp_normed(torch::cat(outs, 1));
    ct_bar = torch::cat({memory.narrow(1, 0, 1), comp}, 1);
  } else if (K > 1) {
    // h == 1 (the default), kept apart from the branch above because it needs no copy of the
    // keys and values. F_comp for block k + 1 from history block k: the queries of blocks 1..K-1
    // shifted down one block, so group (b, k) pairs the queries of block k + 1 with history k
    // (the last group's queries are zeros and its result is dropped).
    auto q = map_rows(comp_q_, memory.narrow(1, 1, K - 1));
    q = torch::cat({q, torch::zeros({B, 1, M, C}, q.options())}, 1).view({B * K, M, H, D});
    const double scale = 1.0 / (static_cast<double>(M) * std::sqrt(static_cast<double>(C)));
    const auto v = part(opt_.diff ? 2 : 1, N);
    auto out = block_attention(q, part(0, N), v, scale);  // (B·K,M,H,D)
    if (opt_.diff) out = out - gamma().view({H, 1}) * block_attention(q, part(1, N), v, scale);
    auto comp = comp_normed(out.view({B, K, M, C}).narrow(1, 0, K - 1));  // the last group is dropped: not normed
    ct_bar = torch::cat({memory.narrow(1, 0, 1), comp}, 1);
  }
  auto ct_out = evolve(memory, ct_bar);  // (B,K,M,C)
  // F_prop: block k's tokens query the m tokens of ct'_k; λ_h scales head h's values (λ S V = S λV).
  const auto kv = torch::matmul(ct_out, torch::cat({prop_k_->weight, prop_v_->weight}, 0).t()).split(C, -1);
  const auto k = kv[0].reshape({B * K, M, H, D});
  const auto v = kv[1].reshape({B * K, M, H, D}) * lambda_.view({H, 1});
  auto y = block_attention(part(maps.size() - 1, N), k, v, 1.0 / std::sqrt(static_cast<double>(D)));  // (B·K,N,H,D)
  return {torch::relu(prop_norm_(y.view({B, K * N, C}))), ct_out};
}

MemoryOutput BrlMixer::forward_memory(const torch::Tensor& x, const torch::Tensor& memory) {
  const char* fn = "brl forward";
  check_shape(fn, "x", x, {-1, -1, dims_.d_model}, "(B,T,C)");
  check_floating(fn, "x", x);
  const int64_t B = x.size(0), T = x.size(1), C = dims_.d_model, M = opt_.slots;
  MIXLAB_CHECK(T > 0, "{}: x must have T > 0, got shape {}", fn, shape_string(x));
  const int64_t K = blocks_for(T);
  // One block (T <= block) has no history, so its padded rows are never read: pad to T, not to
  // the block, and memory follows T (brl:w=16777216, whose block defaults to w, padded every
  // sequence to 2^24 rows).
  const int64_t N = K == 1 ? T : opt_.block;
  check_shape(fn, "memory", memory, {B, K, M, C}, "(B,K,M,C) with K = ceil(T/block)");

  auto y_gen = local_->forward(x);  // F_gen, O(T·W·C)
  // Blocks: pad the tail so x is (B,K,N,C); the padding is never a history (only blocks
  // 0..K-2, all complete, are) and its outputs are cut off below.
  auto xb = K * N == T ? x.reshape({B, K, N, C}) : torch::constant_pad_nd(x, {0, 0, 0, K * N - T}).view({B, K, N, C});
  if (opt_.attn == BrlAttn::kSoftmax) {
    auto out = forward_softmax(xb, memory);
    return {y_gen + out.y.reshape({B, K * N, C}).narrow(1, 0, T), out.memory_delta};
  }
  // ct̄: block 0 has no history; block k >= 1 compresses blocks max(0, k-h)..k-1 (this layer's input).
  torch::Tensor ct_bar = memory;
  if (K > 1) {
    std::vector<torch::Tensor> comp = {memory.narrow(1, 0, 1)};
    for (const auto& piece : history_pieces(xb, opt_.hist / N))
      comp.push_back(compress(memory.narrow(1, piece.first, piece.count), piece.rows));  // (B,count,M,C)
    ct_bar = torch::cat(comp, 1);
  }
  auto ct_out = evolve(memory, ct_bar);  // (B,K,M,C)
  auto kv = prop_keys_values(ct_out);    // (B,K,H,M,D)
  auto y_reg = propagate(xb, kv.first, kv.second).reshape({B, K * N, C}).narrow(1, 0, T);
  return {y_gen + y_reg, ct_out};
}

std::unique_ptr<MixerState> BrlMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch > 0, "{}: init_state batch must be > 0, got {}", spec(), batch);
  auto s = std::make_unique<BrlState>();
  // The state holds the last hist inputs of each sequence by definition (F_comp reads them at each
  // block boundary), so a large hist (or w, which sets it by default) costs its memory here; a
  // failed allocation names what asked for it instead of LibTorch's allocator.
  try {
    s->block_inputs = torch::zeros({batch, opt_.hist, dims_.d_model}, ct0_.options().requires_grad(false));
  } catch (const std::exception& e) {
    const double bytes = static_cast<double>(batch) * static_cast<double>(opt_.hist) *
                         static_cast<double>(dims_.d_model) * static_cast<double>(ct0_.element_size());
    MIXLAB_CHECK_IO(false,
                    "{}: init_state: the decode state holds the last hist = {} inputs of each of the {} sequences "
                    "({} x {} x {} numbers, {:.3g} GB) and that memory could not be allocated ({}); lower hist (or w, "
                    "which sets it) or the batch",
                    spec(), opt_.hist, batch, batch, opt_.hist, dims_.d_model, bytes / 1e9, shown_text(e.what(), 160));
  }
  s->local = local_->init_state(batch);  // after the history buffer, usually the larger one
  return s;
}

MemoryOutput BrlMixer::step_memory(MixerState& state_base, const torch::Tensor& x_t, const torch::Tensor& memory) {
  auto* state = dynamic_cast<BrlState*>(&state_base);
  MIXLAB_CHECK(state != nullptr, "brl step: state was not created by this mixer's init_state");
  check_shape("brl step", "x_t", x_t, {state->block_inputs.size(0), dims_.d_model}, "(B,C)");
  // The inputs buffer is a ring of the last hist inputs (F_comp's keys carry no position, so their
  // order does not matter); a block boundary comes every N tokens.
  const int64_t N = opt_.block, slot = state->pos % opt_.hist;
  MemoryOutput out;
  if (state->pos % N == 0) {
    // Block boundary: the buffer holds the history (the last min(pos, hist) inputs), if any.
    check_shape("brl step", "memory", memory, {x_t.size(0), opt_.slots, dims_.d_model}, "(B,M,C)");
    if (boundary_on_rows(memory, *state)) {
      // F_comp, the evolution and F_prop's keys/values on raw rows (brl_step_rows.cpp).
      out.memory_delta = boundary_rows(memory.contiguous(), *state);
    } else {
      auto ct_bar = state->pos == 0
                        ? memory
                        : compress(memory, state->block_inputs.narrow(1, 0, std::min(state->pos, opt_.hist)));
      out.memory_delta = evolve(memory, ct_bar);
      std::tie(state->prop_k, state->prop_v) = prop_keys_values(out.memory_delta);
      // Contiguous (B,H,M,D), as the raw rows write them: the per-token F_prop reads them per head.
      state->prop_k = state->prop_k.contiguous();
      state->prop_v = state->prop_v.contiguous();
    }
  }
  auto y_gen = local_->step(*state->local, x_t);
  // Without autograd, F_prop, the sum and the block buffer's write run on raw rows (decode is
  // dispatch-bound); otherwise the ATen ops below, the reference they are tested against.
  if (decodes_on_rows(x_t, *state) && y_gen.scalar_type() == x_t.scalar_type() && y_gen.sizes() == x_t.sizes()) {
    out.y = token_rows(x_t.contiguous(), y_gen.contiguous(), *state, slot);
    ++state->pos;
    return out;
  }
  auto y_reg = propagate(x_t.unsqueeze(1), state->prop_k, state->prop_v).squeeze(1);
  {
    torch::NoGradGuard no_grad;
    state->block_inputs.select(1, slot).copy_(x_t);
  }
  ++state->pos;
  out.y = y_gen + y_reg;
  return out;
}

MixerPtr brl_mixer_create(const std::string& spec, const std::string& args, const MixerDims& dims) {
  return std::make_shared<BrlMixer>(dims, brl_options_parse(spec, args));
}

}  // namespace mixlab
