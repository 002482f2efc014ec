// The Transformer-PSM mixer: options, Agg / Inf, the level-batched static scan (Alg. 3), the
// reference forward and streaming (Alg. 4). See mixlab/psm/tpsm.h.
#include "mixlab/psm/tpsm.h"

#include <algorithm>

#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/mixer/parameter_budget.h"

namespace mixlab {

TpsmOptions tpsm_options_parse(const std::string& args_spec) {
  const SpecArgs a(mixer_spec_context(args_spec.empty() ? "tpsm" : "tpsm:" + args_spec), "tpsm", args_spec,
                   {"c|chunk", "d", "agg_d", "inf_d", "agg_heads", "agg_layers", "inf_heads", "inf_layers", "compress",
                    "compress_init", "identity", "pos", "init", "inf", "agg"});
  TpsmOptions o;
  o.chunk = a.integer("c", o.chunk, 1, kSpecMaxInt);
  o.agg_d = o.inf_d = a.integer("d", 0, 1, kSpecMaxInt);  // d sets both; agg_d / inf_d override it
  o.agg_d = a.integer("agg_d", o.agg_d, 1, kSpecMaxInt);
  o.inf_d = a.integer("inf_d", o.inf_d, 1, kSpecMaxInt);
  o.agg_heads = a.integer("agg_heads", o.agg_heads, 1, kSpecMaxInt);
  o.inf_heads = a.integer("inf_heads", o.inf_heads, 1, kSpecMaxInt);
  o.agg_layers = a.integer("agg_layers", o.agg_layers, 1, kSpecMaxInt);
  o.inf_layers = a.integer("inf_layers", o.inf_layers, 1, kSpecMaxInt);
  o.compress =
      a.choice("compress", {"right_half", "linear"}, 0) == 1 ? TpsmCompress::kLinear : TpsmCompress::kRightHalf;
  o.identity = static_cast<TpsmIdentity>(a.choice("identity", {"zeros", "learned", "empty"}, 0));
  o.inf_attention_only = a.choice("inf", {"gpt2", "attention"}, 0) == 1;
  o.agg_attention_only = a.choice("agg", {"gpt2", "attention"}, 0) == 1;
  o.compress_sum = a.choice("compress_init", {"right_half", "sum"}, 0) == 1;
  o.rope = a.choice("pos", {"learned", "rope"}, 0) == 1;
  o.init_std = a.real("init", o.init_std, 1e-6, 1.0);
  return o;
}

namespace {

// Agg's and Inf's transformers for options whose widths and heads are resolved.
PsmTransformerOptions agg_options(const TpsmOptions& o) {
  PsmTransformerOptions a{o.agg_d, o.agg_heads, o.agg_layers, 2 * o.chunk, false, o.rope, o.init_std};
  a.attention_only = a.keep_input = o.agg_attention_only;  // agg=attention: a state carries its input
  return a;
}

PsmTransformerOptions inf_options(const TpsmOptions& o) {
  return {o.inf_d, o.inf_heads, o.inf_layers, 2 * o.chunk, true, o.rope, o.init_std, o.inf_attention_only};
}

// The constructor's defaults: 0 widths are the backbone's C, 0 heads its H.
TpsmOptions resolved(TpsmOptions o, const MixerDims& dims) {
  if (o.agg_d == 0) o.agg_d = dims.d_model;
  if (o.inf_d == 0) o.inf_d = dims.d_model;
  if (o.agg_heads == 0) o.agg_heads = dims.n_heads;
  if (o.inf_heads == 0) o.inf_heads = dims.n_heads;
  return o;
}

}  // namespace

double tpsm_parameter_count(const TpsmOptions& options, const MixerDims& dims) {
  // The constructor's tensors: Agg, Inf, W_cmp (compress=linear), e (a parameter when learned, a
  // buffer of zeros otherwise; empty: none), W_in / W_out.
  const TpsmOptions o = resolved(options, dims);
  const double c = static_cast<double>(o.chunk), d = static_cast<double>(o.agg_d),
               C = static_cast<double>(dims.d_model);
  double n = psm_transformer_parameter_count(agg_options(o)) + psm_transformer_parameter_count(inf_options(o));
  if (o.compress == TpsmCompress::kLinear) n += 2 * c * c;
  if (o.identity != TpsmIdentity::kEmpty) n += c * d;
  if (o.agg_d != dims.d_model) n += (C * d + d) + (d * C + C);
  return n;
}

TpsmMixer::TpsmMixer(const std::string& args_spec, const MixerDims& dims)
    : TpsmMixer(tpsm_options_parse(args_spec), dims) {}

TpsmMixer::TpsmMixer(const TpsmOptions& options, const MixerDims& dims) : options_(options) {
  auto& o = options_;
  MIXLAB_CHECK(o.chunk >= 1, "tpsm: chunk c must be >= 1, got {}", o.chunk);
  MIXLAB_CHECK(dims.d_model > 0, "tpsm: model width C must be > 0, got {}", dims.d_model);
  C_ = dims.d_model;
  o = resolved(o, dims);
  MIXLAB_CHECK(o.agg_d == o.inf_d,
               "tpsm: agg_d and inf_d must be equal (the state Agg produces is Inf's input), got agg_d = {}, inf_d "
               "= {}",
               o.agg_d, o.inf_d);
  d_ = o.agg_d;
  MIXLAB_CHECK(!o.compress_sum || o.compress == TpsmCompress::kLinear,
               "tpsm: compress_init=sum needs compress=linear (right_half has no weights to start)");
  check_mixer_parameter_budget(
      "tpsm", tpsm_parameter_count(o, dims), C_,
      fmt::format("the width d (agg_d = inf_d = {}), agg_layers ({}), inf_layers ({}) or the chunk c ({})", d_,
                  o.agg_layers, o.inf_layers, o.chunk));
  const PsmTransformerOptions a = agg_options(o), f = inf_options(o);
  agg_net_ = register_module("agg", PsmTransformer(a, "tpsm Agg (agg_d, agg_heads, agg_layers)"));
  inf_net_ = register_module("inf", PsmTransformer(f, "tpsm Inf (inf_d, inf_heads, inf_layers)"));
  if (o.compress == TpsmCompress::kLinear) {
    // Starts as the right-half selection, so both options begin from the same function; or
    // (compress_init=sum) as the row-wise sum of both halves, so the older block is not dropped.
    auto w = torch::zeros({o.chunk, 2 * o.chunk});
    w.narrow(1, o.chunk, o.chunk).copy_(torch::eye(o.chunk));
    if (o.compress_sum) w.narrow(1, 0, o.chunk).copy_(torch::eye(o.chunk));
    compress_ = register_parameter("compress", w);
  }
  if (o.identity == TpsmIdentity::kLearned) {
    e_ = register_parameter("identity", torch::randn({o.chunk, d_}) * 0.02);
  } else {
    // identity=empty: a state of 0 rows, so Agg(e, x) and Inf(e, C) see x and C alone.
    e_ = register_buffer("identity", torch::zeros({o.identity == TpsmIdentity::kEmpty ? 0 : o.chunk, d_}));
  }
  if (d_ != C_) {
    w_in_ = register_module("w_in", torch::nn::Linear(C_, d_));
    w_out_ = register_module("w_out", torch::nn::Linear(d_, C_));
  }
}

std::string TpsmMixer::spec() const {
  const auto& o = options_;
  return fmt::format(
      "tpsm:c={}:agg_d={}:inf_d={}:agg_heads={}:agg_layers={}:inf_heads={}:inf_layers={}:compress={}:"
      "identity={}:pos={}:init={}:inf={}:agg={}:compress_init={}",
      o.chunk, o.agg_d, o.inf_d, o.agg_heads, o.agg_layers, o.inf_heads, o.inf_layers,
      o.compress == TpsmCompress::kLinear ? "linear" : "right_half",
      o.identity == TpsmIdentity::kLearned ? "learned"
      : o.identity == TpsmIdentity::kEmpty ? "empty"
                                           : "zeros",
      o.rope ? "rope" : "learned", o.init_std, o.inf_attention_only ? "attention" : "gpt2",
      o.agg_attention_only ? "attention" : "gpt2", o.compress_sum ? "sum" : "right_half");
}

void TpsmMixer::check_input(const torch::Tensor& x, const char* what) const {
  MIXLAB_CHECK(x.defined(), "tpsm: {} is undefined", what);
  MIXLAB_CHECK(x.is_floating_point(), "tpsm: {} must be floating point, got {}", what, c10::toString(x.scalar_type()));
}

torch::Tensor TpsmMixer::encode(const torch::Tensor& x) { return w_in_ ? w_in_(x) : x; }
torch::Tensor TpsmMixer::decode(const torch::Tensor& y) { return w_out_ ? w_out_(y) : y; }

torch::Tensor TpsmMixer::identity(int64_t n) const { return e_.unsqueeze(0).expand({n, e_.size(0), d_}); }

torch::Tensor TpsmMixer::agg(const torch::Tensor& left, const torch::Tensor& right) {
  const int64_t c = options_.chunk, l = left.size(1);  // l = c, or 0 for the empty identity
  auto y = agg_net_(torch::cat({left, right}, 1));     // (N,l+c,d)
  if (options_.compress == TpsmCompress::kLinear) {
    // Without a left block only W_cmp's right columns apply (the rows the outputs stand for).
    return torch::matmul(compress_.narrow(1, c - l, c + l).to(y.scalar_type()), y);
  }
  return y.narrow(1, l, c);
}

torch::Tensor TpsmMixer::inf(const torch::Tensor& state, const torch::Tensor& chunk) {
  const int64_t l = state.size(1);                   // c, or 0 for the empty identity
  auto y = inf_net_(torch::cat({state, chunk}, 1));  // (N,l+j,d)
  return y.narrow(1, l, chunk.size(1));
}

torch::Tensor TpsmMixer::forward(const torch::Tensor& x) {
  check_input(x, "x");
  MIXLAB_CHECK(x.dim() == 3 && x.size(2) == C_ && x.size(1) >= 1,
               "tpsm: x must be (B,T,C) with C = {} and T >= 1, got {}", C_, shape_string(x));
  const int64_t B = x.size(0), T = x.size(1), c = options_.chunk;
  const int64_t r = (T + c - 1) / c;  // chunks; the last one is zero-padded
  auto u = encode(x);                 // (B,T,d)
  if (r * c != T) u = torch::cat({u, u.new_zeros({B, r * c - T, d_})}, 1);
  auto chunks = u.reshape({B, r, c, d_});  // (B,r,c,d)

  // Record the engine's tree over chunks 0..r-2: ids < m are leaves, id m is e, then Agg nodes.
  struct Node {
    int64_t left, right, depth;
  };
  const int64_t m = r - 1;
  std::vector<Node> nodes(static_cast<size_t>(m + 1), Node{-1, -1, 0});
  auto record = [&nodes](int64_t l, int64_t rr) {
    nodes.push_back(
        Node{l, rr, std::max(nodes[static_cast<size_t>(l)].depth, nodes[static_cast<size_t>(rr)].depth) + 1});
    return static_cast<int64_t>(nodes.size()) - 1;
  };
  std::vector<int64_t> leaves(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) leaves[static_cast<size_t>(i)] = i;
  ScanOptions serial;
  serial.parallel = false;  // `record` appends to one vector
  const std::vector<int64_t> prefix_ids = blelloch_scan<int64_t>(leaves, record, m, serial);

  // Execute the recorded calls, one batched Agg per depth (all inputs of depth k are < k).
  std::vector<torch::Tensor> value(nodes.size());
  for (int64_t i = 0; i < m; ++i) value[static_cast<size_t>(i)] = chunks.select(1, i);
  value[static_cast<size_t>(m)] = identity(B);
  int64_t max_depth = 0;
  for (const auto& n : nodes) max_depth = std::max(max_depth, n.depth);
  std::vector<std::vector<int64_t>> by_depth(static_cast<size_t>(max_depth + 1));
  for (size_t id = static_cast<size_t>(m) + 1; id < nodes.size(); ++id)
    by_depth[static_cast<size_t>(nodes[id].depth)].push_back(static_cast<int64_t>(id));
  stats_ = TpsmScanStats{r, static_cast<int64_t>(nodes.size()) - m - 1, 0, 0};
  for (const auto& level : by_depth) {
    if (level.empty()) continue;
    // One Agg call per left-operand row count: all of them, except with the empty identity, whose
    // Agg(e, .) nodes run on c rows instead of 2c.
    for (const bool left_empty : {false, true}) {
      std::vector<int64_t> ids;
      std::vector<torch::Tensor> lefts, rights;
      for (int64_t id : level) {
        const auto& node = nodes[static_cast<size_t>(id)];
        if ((value[static_cast<size_t>(node.left)].size(1) == 0) != left_empty) continue;
        ids.push_back(id);
        lefts.push_back(value[static_cast<size_t>(node.left)]);
        rights.push_back(value[static_cast<size_t>(node.right)]);
      }
      if (ids.empty()) continue;
      const int64_t n = static_cast<int64_t>(ids.size());
      auto out = agg(torch::cat(lefts, 0), torch::cat(rights, 0)).view({n, B, c, d_});  // node-major
      for (int64_t k = 0; k < n; ++k) value[static_cast<size_t>(ids[static_cast<size_t>(k)])] = out.select(0, k);
      ++stats_.batched_levels;
      stats_.max_agg_batch = std::max(stats_.max_agg_batch, n);
    }
  }

  // s_{i-1} = P_i for chunk i < r; Inf on every chunk in one call (with the empty identity, chunk
  // 0, whose state has no rows, in a call of its own).
  const int64_t first = e_.size(0) == 0 ? 1 : 0;  // chunks before `first` are predicted from e alone
  std::vector<torch::Tensor> states;
  for (int64_t i = first; i < r; ++i) states.push_back(value[static_cast<size_t>(prefix_ids[static_cast<size_t>(i)])]);
  std::vector<torch::Tensor> ys;
  if (first == 1) ys.push_back(inf(identity(B), chunks.select(1, 0)).unsqueeze(1));  // (B,1,c,d)
  if (r > first) {
    auto s = torch::stack(states, 1).reshape({B * (r - first), c, d_});  // (B (r-first), c, d)
    auto rest = chunks.narrow(1, first, r - first).reshape({B * (r - first), c, d_});
    ys.push_back(inf(s, rest).reshape({B, r - first, c, d_}));
  }
  auto y = (ys.size() == 1 ? ys[0] : torch::cat(ys, 1)).reshape({B, r * c, d_});  // (B, r c, d)
  return decode(y.narrow(1, 0, T));
}

torch::Tensor TpsmMixer::reference_forward(const torch::Tensor& x) {
  check_input(x, "x");
  MIXLAB_CHECK(x.dim() == 3 && x.size(2) == C_ && x.size(1) >= 1,
               "tpsm: x must be (B,T,C) with C = {} and T >= 1, got {}", C_, shape_string(x));
  const int64_t B = x.size(0), T = x.size(1), c = options_.chunk;
  const int64_t r = (T + c - 1) / c;
  auto u = encode(x);
  if (r * c != T) u = torch::cat({u, u.new_zeros({B, r * c - T, d_})}, 1);
  auto chunks = u.reshape({B, r, c, d_});
  // The aggregate of the aligned block [j 2^l, (j+1) 2^l): its two halves, left one first.
  std::function<torch::Tensor(int64_t, int64_t)> block = [&](int64_t l, int64_t j) -> torch::Tensor {
    if (l == 0) return chunks.select(1, j);
    return agg(block(l - 1, 2 * j), block(l - 1, 2 * j + 1));
  };
  std::vector<torch::Tensor> ys;
  for (int64_t i = 0; i < r; ++i) {
    // P_i: fold e with the blocks of i's binary digits, most significant first.
    torch::Tensor p = identity(B);
    int64_t offset = 0;
    for (int64_t bit = 62; bit >= 0; --bit) {
      if (((i >> bit) & 1) == 0) continue;
      p = agg(p, block(bit, offset >> bit));
      offset += int64_t{1} << bit;
    }
    ys.push_back(inf(p, chunks.select(1, i)));
  }
  return decode(torch::cat(ys, 1).narrow(1, 0, T));
}

std::unique_ptr<TpsmState::Counter> TpsmMixer::make_counter(int64_t batch) {
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> fn =
      [this](const torch::Tensor& l, const torch::Tensor& r) { return agg_decode(l, r); };
  return std::make_unique<TpsmState::Counter>(std::move(fn), identity(batch).contiguous());
}

std::unique_ptr<MixerState> TpsmMixer::init_state(int64_t batch) {
  MIXLAB_CHECK(batch >= 1, "tpsm: init_state batch must be >= 1, got {}", batch);
  auto s = std::make_unique<TpsmState>();
  s->batch_ = batch;
  s->buf_ = torch::zeros({batch, options_.chunk, d_}, e_.options());
  s->counter_ = make_counter(batch);
  return s;
}

torch::Tensor TpsmMixer::step(MixerState& state, const torch::Tensor& x_t) {
  auto* s = dynamic_cast<TpsmState*>(&state);
  MIXLAB_CHECK(s != nullptr, "tpsm: step needs a state from TpsmMixer::init_state");
  check_input(x_t, "x_t");
  MIXLAB_CHECK(x_t.dim() == 2 && x_t.size(0) == s->batch_ && x_t.size(1) == C_,
               "tpsm: x_t must be (B,C) = ({},{}), got {}", s->batch_, C_, shape_string(x_t));
  if (rows_ready(*s, x_t)) return step_rows(*s, x_t);
  // The reference step: re-runs the ATen Inf on [s | buf] and does not maintain the fast path's
  // key/value cache, so that cache is stale from here on.
  s->kv_len_ = 0;
  const int64_t c = options_.chunk;
  auto u = encode(x_t);  // (B,d)
  if (s->buf_.scalar_type() != u.scalar_type()) s->buf_ = s->buf_.to(u.scalar_type());
  // Out of place: the previous buffer may be saved by autograd in an earlier step's graph.
  auto buf = s->buf_.clone();
  buf.select(1, s->fill_).copy_(u);
  s->buf_ = buf;
  ++s->fill_;
  ++s->position_;
  auto y = inf(s->counter_->prefix(), s->buf_.narrow(1, 0, s->fill_)).select(1, s->fill_ - 1);  // (B,d)
  if (s->fill_ == c) {
    s->counter_->insert(s->buf_);
    s->buf_ = torch::zeros_like(s->buf_);
    s->fill_ = 0;
  }
  return decode(y);
}

int64_t TpsmState::bytes() const {
  int64_t total = tensor_bytes(buf_);
  for (const auto& slot : counter_->slots()) total += tensor_bytes(slot.root) + tensor_bytes(slot.fold);
  return total + tensor_bytes(kv_);
}

}  // namespace mixlab
