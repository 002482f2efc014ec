// Decoder backbone: embedding, pre-LN blocks (mixer + GELU MLP), final LN, tied head.
#include "mixlab/model/model.h"

#include <cmath>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/mixers/registry.h"

namespace mixlab {

MixerFactory mixer_factory_from_spec(const std::string& spec) {
  return [spec](const MixerDims& dims) { return mixer_create(spec, dims); };
}

Block::Block(const ModelDims& dims, MixerPtr mixer) : mixer_(std::move(mixer)) {
  MIXLAB_CHECK(mixer_ != nullptr, "Block: the mixer factory returned null");
  const int64_t C = dims.d_model;
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  register_module("mixer", mixer_);
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({C})));
  fc_ = register_module("fc", torch::nn::Linear(C, dims.mlp_ratio * C));
  proj_ = register_module("proj", torch::nn::Linear(dims.mlp_ratio * C, C));
  torch::NoGradGuard no_grad;
  fc_->weight.normal_(0.0, 0.02);
  fc_->bias.zero_();
  proj_->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(dims.layers)));
  proj_->bias.zero_();
}

torch::Tensor Block::mlp(const torch::Tensor& x) { return proj_(torch::gelu(fc_(ln2_(x)))); }

torch::Tensor Block::forward(const torch::Tensor& x) {
  auto h = x + mixer_->forward(ln1_(x));
  return h + mlp(h);
}

torch::Tensor Block::step(MixerState& state, const torch::Tensor& x_t) {
  auto h = x_t + mixer_->step(state, ln1_(x_t));
  return h + mlp(h);
}

int64_t DecoderState::bytes() const {
  int64_t total = 0;
  for (const auto& s : blocks) total += s->bytes();
  return total;
}

DecoderModel::DecoderModel(const ModelDims& dims, const MixerFactory& factory) : dims_(dims) {
  MIXLAB_CHECK(dims.vocab >= 1 && dims.d_model >= 1 && dims.layers >= 1 && dims.mlp_ratio >= 1,
               "DecoderModel: vocab, d_model, layers and mlp_ratio must be >= 1, got {}, {}, {}, {}", dims.vocab,
               dims.d_model, dims.layers, dims.mlp_ratio);
  embed_ = register_module("embed", torch::nn::Embedding(dims.vocab, dims.d_model));
  {
    torch::NoGradGuard no_grad;
    embed_->weight.normal_(0.0, 0.02);
  }
  MixerDims md;
  md.d_model = dims.d_model;
  md.n_heads = dims.heads;
  md.max_len = dims.max_len;
  for (int64_t l = 0; l < dims.layers; ++l) {
    blocks_.push_back(register_module("block" + std::to_string(l), std::make_shared<Block>(dims, factory(md))));
  }
  ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dims.d_model})));
}

torch::Tensor DecoderModel::forward(const torch::Tensor& tokens) {
  check_dim("DecoderModel::forward", "tokens", tokens, 2, "(B,T)");
  MIXLAB_CHECK(tokens.scalar_type() == torch::kInt64, "DecoderModel::forward: tokens must be int64, got {}",
               c10::toString(tokens.scalar_type()));
  MIXLAB_CHECK(tokens.size(1) <= dims_.max_len, "DecoderModel::forward: T = {} exceeds max_len = {}", tokens.size(1),
               dims_.max_len);
  auto x = embed_(tokens);  // (B,T,C)
  for (auto& b : blocks_) x = b->forward(x);
  return torch::matmul(ln_f_(x), embed_->weight.t());  // (B,T,V)
}

DecoderState DecoderModel::init_state(int64_t batch) {
  MIXLAB_CHECK(batch >= 1, "DecoderModel::init_state: batch must be >= 1, got {}", batch);
  DecoderState s;
  for (auto& b : blocks_) s.blocks.push_back(b->mixer().init_state(batch));
  return s;
}

torch::Tensor DecoderModel::step(DecoderState& state, const torch::Tensor& tokens_t) {
  check_dim("DecoderModel::step", "tokens_t", tokens_t, 1, "(B)");
  MIXLAB_CHECK(state.blocks.size() == blocks_.size(), "DecoderModel::step: state has {} blocks, model has {}",
               state.blocks.size(), blocks_.size());
  MIXLAB_CHECK(state.position < dims_.max_len, "DecoderModel::step: position {} reached max_len = {}", state.position,
               dims_.max_len);
  auto x = embed_(tokens_t);  // (B,C)
  for (size_t l = 0; l < blocks_.size(); ++l) x = blocks_[l]->step(*state.blocks[l], x);
  ++state.position;
  return torch::matmul(ln_f_(x), embed_->weight.t());  // (B,V)
}

int64_t DecoderModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace mixlab
