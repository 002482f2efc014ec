// Decoder backbone: embedding, pre-LN blocks (mixer + GELU MLP), final LN, tied head.
#include "mixlab/model/model.h"

#include <cmath>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/row_kernels.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/registry/registry.h"

namespace mixlab {

MixerFactory mixer_factory_from_spec(const std::string& spec, int64_t layers) {
  // The factory is called once per block in block order (MixerFactory), so a counter picks the
  // block's spec; modulo `layers` so that one factory can build several models of that depth.
  auto specs = std::make_shared<const std::vector<std::string>>(mixer_layer_specs(spec, layers));
  auto next = std::make_shared<size_t>(0);
  return [specs, next](const MixerDims& dims) {
    const std::string& s = (*specs)[(*next)++ % specs->size()];
    return mixer_create(s, dims);
  };
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
  memory_mixer_ = std::dynamic_pointer_cast<MemoryMixer>(mixer_);
  if (memory_mixer_) {
    const MemoryDims md = memory_mixer_->memory_dims();
    MIXLAB_CHECK(md.slots >= 1 && md.width >= 1, "Block: memory mixer '{}' reports memory dims M={}, Dm={}",
                 mixer_->spec(), md.slots, md.width);
    mem_ln_ = register_module("mem_ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({md.width})));
    mem_fc_ = register_module("mem_fc", torch::nn::Linear(md.width, dims.mlp_ratio * md.width));
    mem_proj_ = register_module("mem_proj", torch::nn::Linear(dims.mlp_ratio * md.width, md.width));
    mem_fc_->weight.normal_(0.0, 0.02);
    mem_fc_->bias.zero_();
    mem_proj_->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(dims.layers)));
    mem_proj_->bias.zero_();
  }
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

namespace {

// The raw-row decode path applies to contiguous CPU rows of float or double whose LayerNorm and
// Linear parameters are contiguous and of the same dtype (the trained model's; not a mix).

template <typename T>
const T* ptr_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// out = h + proj(gelu(fc(ln2(h)))) row by row, h = x + mixed: the block after its mixer.
template <typename T>
void block_tail_rows(const torch::Tensor& x, const torch::Tensor& mixed, torch::Tensor& out,
                     const torch::nn::LayerNorm& ln2, const torch::nn::Linear& fc, const torch::nn::Linear& proj) {
  const int64_t B = x.size(0), C = x.size(1), M = fc->weight.size(0);
  std::vector<T> n(static_cast<size_t>(C)), u(static_cast<size_t>(M));
  const T* xp = x.data_ptr<T>();
  const T* mp = mixed.data_ptr<T>();
  T* op = out.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {
    T* h = op + b * C;  // h is built in the output row, then the MLP is added to it
    for (int64_t i = 0; i < C; ++i) h[i] = xp[b * C + i] + mp[b * C + i];
    row::layer_norm<T>(h, n.data(), ptr_or_null<T>(ln2->weight), ptr_or_null<T>(ln2->bias), C, ln2->options.eps());
    row::linear<T>(fc->weight.data_ptr<T>(), ptr_or_null<T>(fc->bias), n.data(), u.data(), M, C);
    row::gelu<T>(u.data(), M);
    std::vector<T>& o = n;  // reuse: the LN output is no longer needed
    row::linear<T>(proj->weight.data_ptr<T>(), ptr_or_null<T>(proj->bias), u.data(), o.data(), C, M);
    row::add<T>(o.data(), h, C);
  }
}

template <typename T>
void layer_norm_rows(const torch::Tensor& x, torch::Tensor& y, const torch::nn::LayerNorm& ln) {
  const int64_t B = x.size(0), C = x.size(1);
  for (int64_t b = 0; b < B; ++b)
    row::layer_norm<T>(x.data_ptr<T>() + b * C, y.data_ptr<T>() + b * C, ptr_or_null<T>(ln->weight),
                       ptr_or_null<T>(ln->bias), C, ln->options.eps());
}

}  // namespace

torch::Tensor Block::step_fast(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory_in,
                               torch::Tensor& memory_out) {
  // The mixer's own step. A memory mixer reads the stream entering the block and, at a segment
  // boundary, reports the delta that renews this block's outgoing memory: that update stays in
  // ATen (once per segment); the per-token LayerNorms, MLP and residuals take the raw rows below
  // as for any mixer.
  auto mix = [&](const torch::Tensor& normed) {
    if (!memory_mixer_) return mixer_->step(state, normed);
    auto out = memory_mixer_->step_memory(state, normed, memory_in);
    if (out.memory_delta.defined() && memory_out_read_) memory_out = memory_update(memory_in, out.memory_delta);
    return out.y;
  };
  const int64_t C = x_t.size(-1);
  if (row::raw_rows_ok(x_t, {&ln1_->weight, &ln1_->bias, &ln2_->weight, &ln2_->bias, &fc_->weight, &fc_->bias,
                             &proj_->weight, &proj_->bias})) {
    // Raw rows: the LayerNorms, the MLP and the residuals without a dispatch per op.
    auto normed = at::empty_like(x_t);
    auto out = at::empty_like(x_t);
    AT_DISPATCH_FLOATING_TYPES(x_t.scalar_type(), "Block::step_fast", [&] {
      layer_norm_rows<scalar_t>(x_t, normed, ln1_);
      auto mixed = mix(normed).contiguous();
      block_tail_rows<scalar_t>(x_t, mixed, out, ln2_, fc_, proj_);
    });
    return out;
  }
  const auto& o1 = ln1_->options;
  auto h = at::add(x_t, mix(at::layer_norm(x_t, {C}, ln1_->weight, ln1_->bias, o1.eps())));
  const auto& o2 = ln2_->options;
  auto u = at::addmm(fc_->bias, at::layer_norm(h, {C}, ln2_->weight, ln2_->bias, o2.eps()), fc_->weight.t());
  at::gelu_(u);
  auto out = at::addmm(proj_->bias, u, proj_->weight.t());
  out.add_(h);
  return out;
}

torch::Tensor Block::prefill(MixerState& state, const torch::Tensor& x) {
  auto h = x + mixer_->prefill(state, ln1_(x));
  return h + mlp(h);
}

torch::Tensor Block::memory_update(const torch::Tensor& memory, const torch::Tensor& delta) {
  auto h = memory + delta;
  return h + mem_proj_(torch::gelu(mem_fc_(mem_ln_(h))));
}

std::pair<torch::Tensor, torch::Tensor> Block::forward(const torch::Tensor& x, const torch::Tensor& memory) {
  if (!memory_mixer_) return {forward(x), memory};
  auto mem = memory.defined() ? memory : memory_mixer_->memory_init(x.size(0), x.size(1));
  auto out = memory_mixer_->forward_memory(ln1_(x), mem);
  auto h = x + out.y;
  return {h + mlp(h), memory_out_read_ ? memory_update(mem, out.memory_delta) : torch::Tensor()};
}

torch::Tensor Block::step(MixerState& state, const torch::Tensor& x_t, const torch::Tensor& memory_in,
                          torch::Tensor& memory_out) {
  if (!memory_mixer_) return step(state, x_t);
  auto out = memory_mixer_->step_memory(state, ln1_(x_t), memory_in);
  if (out.memory_delta.defined() && memory_out_read_) memory_out = memory_update(memory_in, out.memory_delta);
  auto h = x_t + out.y;
  return h + mlp(h);
}

int64_t DecoderState::bytes() const {
  int64_t total = 0;
  for (const auto& s : blocks) total += s->bytes();
  for (const auto& m : memory) total += tensor_bytes(m);
  return total + tensor_bytes(memory_init);
}

int64_t DecoderState::batch() const {
  MIXLAB_CHECK(!blocks.empty(), "DecoderState: the state has no blocks (not made by init_state)");
  return blocks.front()->batch();
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
    if (auto* mm = blocks_.back()->memory_mixer()) {
      if (memory_source_ == nullptr) memory_source_ = mm;
      const MemoryDims a = memory_source_->memory_dims(), b = mm->memory_dims();
      MIXLAB_CHECK(a.slots == b.slots && a.width == b.width,
                   "DecoderModel: block {} memory mixer has memory M={}, Dm={}, the stream has M={}, Dm={}", l, b.slots,
                   b.width, a.slots, a.width);
    }
  }
  // A block's outgoing memory is read only if a later block has a memory mixer: the last memory
  // block's update (an LN and an MLP over K·M memory rows, as many as the tokens at BRL's
  // defaults) was computed and dropped by every training step.
  bool later_reader = false;
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    (*it)->set_memory_out_read(later_reader);
    later_reader = later_reader || (*it)->memory_mixer() != nullptr;
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
  torch::Tensor memory;     // the memory stream, (B,K,M,Dm), when a block has a memory mixer
  if (memory_source_ != nullptr) memory = memory_source_->memory_init(tokens.size(0), tokens.size(1));
  for (auto& b : blocks_) std::tie(x, memory) = b->forward(x, memory);
  return torch::matmul(ln_f_(x), embed_->weight.t());  // (B,T,V)
}

DecoderState DecoderModel::init_state(int64_t batch) {
  MIXLAB_CHECK(batch >= 1, "DecoderModel::init_state: batch must be >= 1, got {}", batch);
  DecoderState s;
  for (auto& b : blocks_) s.blocks.push_back(b->mixer().init_state(batch));
  s.memory.resize(blocks_.size());
  if (memory_source_ != nullptr) s.memory_init = memory_source_->memory_init_step(batch).detach().clone();
  return s;
}

torch::Tensor DecoderModel::step_reference(DecoderState& state, const torch::Tensor& tokens_t) {
  check_step_input(state, tokens_t);
  auto x = embed_(tokens_t);                 // (B,C)
  torch::Tensor memory = state.memory_init;  // entering block 0; each memory block replaces it
  for (size_t l = 0; l < blocks_.size(); ++l) {
    x = blocks_[l]->step(*state.blocks[l], x, memory, state.memory[l]);
    if (blocks_[l]->memory_mixer() != nullptr) memory = state.memory[l];
  }
  ++state.position;
  return torch::matmul(ln_f_(x), embed_->weight.t());  // (B,V)
}

void DecoderModel::check_step_input(const DecoderState& state, const torch::Tensor& tokens_t) const {
  check_dim("DecoderModel::step", "tokens_t", tokens_t, 1, "(B)");
  MIXLAB_CHECK(tokens_t.scalar_type() == torch::kInt64, "DecoderModel::step: tokens_t must be int64, got {}",
               c10::toString(tokens_t.scalar_type()));
  check_state(state, "DecoderModel::step");
  MIXLAB_CHECK(state.position < dims_.max_len, "DecoderModel::step: position {} reached max_len = {}", state.position,
               dims_.max_len);
}

torch::Tensor DecoderModel::step(DecoderState& state, const torch::Tensor& tokens_t) {
  check_step_input(state, tokens_t);
  // Decode never trains: InferenceMode skips autograd and version-counter bookkeeping on every op,
  // which at d = 64 is most of an op's cost (profiled: docs/log/benchmarks-2026-11.md, decode engine).
  c10::InferenceMode inference;
  auto x = at::embedding(embed_->weight, tokens_t);  // (B,C)
  torch::Tensor memory = state.memory_init;
  for (size_t l = 0; l < blocks_.size(); ++l) {
    x = blocks_[l]->step_fast(*state.blocks[l], x, memory, state.memory[l]);
    if (blocks_[l]->memory_mixer() != nullptr) memory = state.memory[l];
  }
  ++state.position;
  if (row::raw_rows_ok(x, {&ln_f_->weight, &ln_f_->bias, &embed_->weight})) {
    // Final LayerNorm and the tied head on raw rows, as the blocks.
    const int64_t B = x.size(0), C = x.size(1), V = embed_->weight.size(0);
    auto logits = at::empty({B, V}, x.options());
    auto normed = at::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "DecoderModel::step", [&] {
      layer_norm_rows<scalar_t>(x, normed, ln_f_);
      for (int64_t b = 0; b < B; ++b)
        row::linear<scalar_t>(embed_->weight.data_ptr<scalar_t>(), nullptr, normed.data_ptr<scalar_t>() + b * C,
                              logits.data_ptr<scalar_t>() + b * V, V, C);
    });
    return logits;
  }
  return at::matmul(ln_f_->forward(x), embed_->weight.t());  // (B,V)
}

void DecoderModel::check_state(const DecoderState& state, const char* fn) const {
  MIXLAB_CHECK(state.blocks.size() == blocks_.size(), "{}: state has {} blocks, model has {}", fn, state.blocks.size(),
               blocks_.size());
  MIXLAB_CHECK(state.memory.size() == blocks_.size(), "{}: state has {} memory slots, model has {} blocks", fn,
               state.memory.size(), blocks_.size());
}

torch::Tensor DecoderModel::prefill(DecoderState& state, const torch::Tensor& tokens) {
  const char* fn = "DecoderModel::prefill";
  c10::InferenceMode inference;
  check_dim(fn, "tokens", tokens, 2, "(B,T)");
  MIXLAB_CHECK(tokens.scalar_type() == torch::kInt64, "{}: tokens must be int64, got {}", fn,
               c10::toString(tokens.scalar_type()));
  MIXLAB_CHECK(tokens.size(1) >= 1, "{}: tokens must have T >= 1, got {}", fn, shape_string(tokens));
  check_state(state, fn);
  MIXLAB_CHECK(state.position + tokens.size(1) <= dims_.max_len, "{}: position {} + T = {} exceeds max_len = {}", fn,
               state.position, tokens.size(1), dims_.max_len);
  if (memory_source_ != nullptr) {
    // The memory stream is recomputed at segment boundaries inside the chunk: step through it.
    std::vector<torch::Tensor> rows;
    for (int64_t t = 0; t < tokens.size(1); ++t) rows.push_back(step(state, tokens.select(1, t)));
    return torch::stack(rows, 1);
  }
  auto x = embed_(tokens);  // (B,T,C)
  for (size_t l = 0; l < blocks_.size(); ++l) x = blocks_[l]->prefill(*state.blocks[l], x);
  state.position += tokens.size(1);
  return torch::matmul(ln_f_(x), embed_->weight.t());  // (B,T,V)
}

std::string DecoderModel::state_spec() const {
  std::string s = fmt::format("decoder:vocab={}:d={}:layers={}:heads={}:mlp={}:max_len={}", dims_.vocab, dims_.d_model,
                              dims_.layers, dims_.heads, dims_.mlp_ratio, dims_.max_len);
  for (const auto& b : blocks_) s += "|" + b->mixer().spec();
  return s;
}

StateRecord DecoderModel::state_record(const DecoderState& state_in, bool copy) {
  auto& state = const_cast<DecoderState&>(state_in);  // a writing archive only reads the fields
  check_state(state, "DecoderModel::save");
  auto ar = StateArchive::writer(copy);
  ar.scalar("position", state.position);
  ar.tensor("memory_init", state.memory_init);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    ar.nested("block" + std::to_string(l), *state.blocks[l]);
    ar.tensor("memory" + std::to_string(l), state.memory[l]);
  }
  StateRecord r;
  r.spec = state_spec();
  r.batch = state.batch();
  r.position = state.position;
  r.entries = std::move(ar.entries());
  return r;
}

DecoderState DecoderModel::state_from_record(StateRecord record, const std::string& source) {
  MIXLAB_CHECK(record.spec == state_spec(), "state '{}': saved for model '{}', this model is '{}'", source, record.spec,
               state_spec());
  DecoderState s = init_state(record.batch);
  auto ar = StateArchive::reader(std::move(record.entries), source);
  ar.scalar("position", s.position);
  ar.tensor("memory_init", s.memory_init);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    ar.nested("block" + std::to_string(l), *s.blocks[l]);
    ar.tensor("memory" + std::to_string(l), s.memory[l], false);
    // States saved before the last memory block stopped updating its memory hold one; no block reads it.
    if (!blocks_[l]->memory_out_read()) s.memory[l] = torch::Tensor();
    MIXLAB_CHECK(s.blocks[l]->position() == s.position,
                 "state '{}': block {} is at position {}, the model state at {} (inconsistent)", source, l,
                 s.blocks[l]->position(), s.position);
  }
  ar.finish();
  MIXLAB_CHECK(s.position == record.position, "state '{}': header position {} differs from the stored one {}", source,
               record.position, s.position);
  return s;
}

void DecoderModel::save(const DecoderState& state, std::ostream& out) { state_write(out, state_record(state, false)); }

void DecoderModel::save_file(const DecoderState& state, const std::string& path) {
  state_write_file(path, state_record(state, false));
}

DecoderState DecoderModel::load(std::istream& in, const std::string& source) {
  return state_from_record(state_read(in, source), source);
}

DecoderState DecoderModel::load_file(const std::string& path) { return state_from_record(state_read_file(path), path); }

DecoderState DecoderModel::fork(const DecoderState& state) {
  return state_from_record(state_record(state, true), "fork");
}

int64_t DecoderModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace mixlab
