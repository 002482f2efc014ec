// Transformer-PSM: scan forward vs the plain reference (forward, backward, gradcheck in double),
// streaming (Alg. 4) vs the training forward (Alg. 3), the binary-counter memory, state
// save/restore, complexity counts and bad input.
#include "mixlab/psm/tpsm.h"

#include <gtest/gtest.h>

#include <bitset>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace tpsm_test {

namespace {

using mixlab::TpsmMixer;
using mixlab::TpsmOptions;
using mixlab::TpsmState;

mixlab::MixerDims dims(int64_t C = 16, int64_t H = 2) {
  mixlab::MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  return d;
}

std::shared_ptr<TpsmMixer> make(const std::string& args, int64_t C = 16, int64_t H = 2) {
  return std::make_shared<TpsmMixer>(args, dims(C, H));
}

int64_t popcount(int64_t v) { return static_cast<int64_t>(std::bitset<64>(static_cast<uint64_t>(v)).count()); }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mixlab_tpsm_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Streams x through step() and stacks the outputs: (B,T,C).
torch::Tensor stream(TpsmMixer& m, mixlab::MixerState& state, const torch::Tensor& x) {
  std::vector<torch::Tensor> ys;
  for (int64_t t = 0; t < x.size(1); ++t) ys.push_back(m.step(state, x.select(1, t)));
  return torch::stack(ys, 1);
}

// Largest difference between streaming (step by step) and the training forward of a fresh
// model `args` on random x (2,T,16), in eval mode; also checks the state's position.
double stream_vs_forward(const std::string& args, int64_t T) {
  torch::manual_seed(11);
  auto m = make(args);
  m->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, T, 16});
  auto y = m->forward(x);
  auto state = m->init_state(2);
  auto ys = stream(*m, *state, x);
  EXPECT_EQ(state->position(), T);
  return (ys - y).abs().max().item<double>();
}

}  // namespace

TEST(Tpsm, StreamingEqualsScanForwardAtEveryPosition) {
  // Thm. 3.5 on the whole model: float32, every position, T not a multiple of c.
  for (auto [c, T, pos] : {std::tuple<int64_t, int64_t, const char*>{1, 257, "learned"},
                           {4, 203, "learned"},
                           {16, 300, "learned"},
                           {1, 129, "rope"},
                           {16, 300, "rope"}}) {
    SCOPED_TRACE("c=" + std::to_string(c) + " T=" + std::to_string(T) + " pos=" + pos);
    EXPECT_LE(
        stream_vs_forward("c=" + std::to_string(c) + ":agg_layers=2:compress=linear:identity=learned:pos=" + pos, T),
        1e-5);
  }
  // Every chunk size of the issue for the MQAR options: the empty identity and the attention-only
  // Inf, then also the attention-only Agg that keeps its input with the summing compression
  // (Agg's decode runs on raw rows inside the counter, so this checks that path too).
  for (const char* options : {":inf_layers=2:compress=linear:identity=empty:inf=attention",
                              ":compress=linear:compress_init=sum:identity=empty:inf=attention:agg=attention"}) {
    for (auto [c, T] : {std::pair<int64_t, int64_t>{1, 129}, {4, 203}, {16, 300}}) {
      SCOPED_TRACE(std::string(options) + " c=" + std::to_string(c) + " T=" + std::to_string(T));
      EXPECT_LE(stream_vs_forward("c=" + std::to_string(c) + ":agg_layers=2" + options, T), 1e-5);
    }
  }
}

TEST(Tpsm, ScanForwardEqualsReferenceForwardAndBackward) {
  for (const char* args :
       {"c=4:agg_layers=2", "c=3:compress=linear:identity=learned", "c=1:d=8:agg_heads=1", "c=4:pos=rope:agg_layers=2",
        "c=4:identity=empty:inf=attention:inf_layers=2", "c=3:compress=linear:identity=empty",
        "c=2:identity=empty:inf=attention:pos=rope", "c=3:agg=attention:agg_layers=2:compress=linear:compress_init=sum",
        "c=4:agg=attention:identity=empty:compress=linear:compress_init=sum:pos=rope"}) {
    SCOPED_TRACE(args);
    torch::manual_seed(12);
    auto m = make(args);
    auto x = torch::randn({2, 29, 16}, torch::requires_grad());
    auto w = torch::randn({2, 29, 16});
    auto y = m->forward(x);
    auto params = m->parameters();
    std::vector<torch::Tensor> inputs = params;
    inputs.push_back(x);
    auto g = torch::autograd::grad({(y * w).sum()}, inputs);
    auto y_ref = m->reference_forward(x);
    auto g_ref = torch::autograd::grad({(y_ref * w).sum()}, inputs);
    EXPECT_TRUE(mixlab::testing::all_close(y, y_ref, 1e-5, 1e-5));
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(mixlab::testing::all_close(g[i], g_ref[i], 1e-4, 1e-5)) << "input " << i;
  }
}

namespace {

void gradcheck_tiny_model(const std::string& args, const std::vector<std::string>& param_names) {
  torch::manual_seed(13);
  auto m = make(args, 4, 1);
  m->to(torch::kDouble);
  auto x = torch::randn({1, 7, 4}, torch::dtype(torch::kDouble).requires_grad(true));
  EXPECT_TRUE(mixlab::testing::gradcheck([&](const std::vector<at::Tensor>& in) { return m->forward(in[0]); }, {x}));
  // Parameters: central differences on e, the compression and one Agg and one Inf weight.
  auto v = torch::randn({1, 7, 4}, torch::kDouble);
  auto x0 = x.detach();
  auto loss = [&] { return (m->forward(x0) * v).sum(); };
  m->zero_grad();
  loss().backward();
  auto params = m->named_parameters();
  for (const auto& name : param_names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(params.contains(name));
    auto p = params[name];
    auto flat = p.detach().view(-1);
    auto numeric = torch::zeros_like(flat);
    torch::NoGradGuard no_grad;
    const double eps = 1e-6;
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double orig = flat[i].item<double>();
      flat[i] = orig + eps;
      const double up = loss().item<double>();
      flat[i] = orig - eps;
      const double down = loss().item<double>();
      flat[i] = orig;
      numeric[i] = (up - down) / (2 * eps);
    }
    EXPECT_TRUE(mixlab::testing::all_close(p.grad().view(-1), numeric, 1e-4, 1e-6));
  }
}

}  // namespace

TEST(Tpsm, GradcheckInDoubleOnTinyModel) {
  for (const char* pos : {"learned", "rope"}) {
    SCOPED_TRACE(pos);
    gradcheck_tiny_model(std::string("c=2:agg_layers=1:compress=linear:identity=learned:pos=") + pos,
                         {"identity", "compress", "agg.block0_qkv.weight", "inf.block0_fc1.weight"});
  }
  // The empty identity has no parameter; the attention-only Inf no MLP.
  gradcheck_tiny_model("c=2:compress=linear:identity=empty:inf=attention:inf_layers=2",
                       {"compress", "agg.block0_fc1.weight", "inf.block0_qkv.weight", "inf.block1_proj.weight"});
  // The attention-only Agg keeping its input, summing compression.
  gradcheck_tiny_model("c=2:compress=linear:compress_init=sum:identity=learned:agg=attention:agg_layers=2",
                       {"identity", "compress", "agg.block0_qkv.weight", "agg.block1_proj.weight"});
}

namespace {

// What one single-head attention layer of `net` ("agg" or "inf") adds to h0 (S rows of width d),
// written out from its parameters: proj(softmax(q k^T / sqrt(d) [+ causal mask]) v), q k v from
// qkv(LN1 h0).
torch::Tensor attention_update(torch::OrderedDict<std::string, torch::Tensor>& params, const std::string& net,
                               const torch::Tensor& h0, bool causal) {
  const int64_t S = h0.size(1), d = h0.size(2);
  auto p = [&](const char* name) { return params[net + ".block0_" + name]; };
  auto a = torch::layer_norm(h0, {d}, p("ln1.weight"), p("ln1.bias"));
  auto qkv = torch::linear(a, p("qkv.weight"), p("qkv.bias")).chunk(3, -1);
  auto scores = torch::matmul(qkv[0], qkv[1].transpose(1, 2)) / std::sqrt(static_cast<double>(d));
  if (causal) scores = scores.masked_fill(torch::ones({S, S}, torch::kBool).triu(1), -INFINITY);
  return torch::linear(torch::matmul(torch::softmax(scores, -1), qkv[2]), p("proj.weight"), p("proj.bias"));
}

// `net` ("agg" or "inf") has no MLP and no final LayerNorm; `other` keeps its GPT-2 MLP.
void expect_attention_only(torch::OrderedDict<std::string, torch::Tensor>& params, const std::string& net,
                           const std::string& other) {
  for (const char* absent : {".block0_fc1.weight", ".block0_ln2.weight", ".ln_f.weight"})
    EXPECT_FALSE(params.contains(net + absent)) << net + absent;
  EXPECT_TRUE(params.contains(other + ".block0_fc1.weight"));
}

}  // namespace

TEST(Tpsm, AttentionOnlyAggKeepsItsInputAndTheSumCompressionKeepsBothBlocks) {
  // agg=attention: Agg's layers are h += proj(MHA(LN1 h)) only, bidirectional, and Agg returns
  // its input plus what they add, x + h_L - h_0; compress_init=sum starts W_cmp as [I | I], so
  // Agg(a, b) starts as the row-wise sum of both outputs. Written out for one layer, c = 3.
  torch::manual_seed(18);
  auto m = make("c=3:agg=attention:compress=linear:compress_init=sum", 8, 1);
  auto params = m->named_parameters();
  expect_attention_only(params, "agg", "inf");  // Inf keeps its default (gpt2)
  EXPECT_TRUE(torch::equal(params["compress"], torch::cat({torch::eye(3), torch::eye(3)}, 1)));
  torch::NoGradGuard no_grad;
  auto a = torch::randn({2, 3, 8}), b = torch::randn({2, 3, 8});
  auto x = torch::cat({a, b}, 1);
  auto out = x + attention_update(params, "agg", x + params["agg.pos"].narrow(0, 0, 6), false);
  auto expected = out.narrow(1, 0, 3) + out.narrow(1, 3, 3);
  EXPECT_TRUE(mixlab::testing::all_close(m->agg(a, b), expected, 1e-5, 1e-6));
}

TEST(Tpsm, AttentionOnlyInfReturnsWhatItsAttentionLayersAdd) {
  // inf=attention: Inf's layers are h += proj(MHA(LN1 h)) only, and it returns h_L - h_0, written
  // out here from the parameters for one layer (c = 3, one chunk predicted from the zero identity).
  torch::manual_seed(14);
  auto m = make("c=3:inf=attention", 8, 1);
  auto params = m->named_parameters();
  expect_attention_only(params, "inf", "agg");  // Agg stays a GPT-2 transformer
  torch::NoGradGuard no_grad;
  auto x = torch::randn({1, 3, 8});
  auto h0 = torch::cat({torch::zeros({1, 3, 8}), x}, 1) + params["inf.pos"].narrow(0, 0, 6);
  auto expected = attention_update(params, "inf", h0, true);
  EXPECT_TRUE(mixlab::testing::all_close(m->forward(x), expected.narrow(1, 3, 3), 1e-5, 1e-6));
}

TEST(Tpsm, EmptyIdentityLeavesTheFirstChunkAndItsAggregatesAlone) {
  // identity=empty: e has no rows, so chunk 0 is Inf on the chunk alone and Agg(e, x) is Agg on x
  // alone; a fresh state holds nothing but the chunk buffer.
  torch::manual_seed(15);
  auto m = make("c=4:identity=empty:compress=linear");
  EXPECT_FALSE(m->named_parameters().contains("identity"));
  EXPECT_EQ(m->identity(3).sizes(), (std::vector<int64_t>{3, 0, 16}));
  torch::NoGradGuard no_grad;
  auto x = torch::randn({3, 10, 16});
  auto y = m->forward(x);
  auto alone = m->inf(m->identity(3), x.narrow(1, 0, 4));
  EXPECT_TRUE(mixlab::testing::all_close(y.narrow(1, 0, 4), alone, 1e-6, 1e-6));
  // Agg(e, x_0): W_cmp's right columns over Agg's c outputs on x_0 alone (W_cmp starts as [0 | I]).
  auto agg = m->agg(m->identity(3), x.narrow(1, 0, 4));
  EXPECT_EQ(agg.sizes(), (std::vector<int64_t>{3, 4, 16}));
  auto state = m->init_state(3);
  EXPECT_EQ(state->bytes(), 3 * 4 * 16 * 4);  // the buffer only
}

TEST(Tpsm, RotaryPositionsReplaceTheLearnedTables) {
  auto learned = make("c=4"), rope = make("c=4:pos=rope");
  auto names = [](TpsmMixer& m) {
    std::set<std::string> out;
    for (const auto& kv : m.named_parameters()) out.insert(kv.key());
    return out;
  };
  const auto with = names(*learned), without = names(*rope);
  EXPECT_TRUE(with.count("agg.pos") && with.count("inf.pos"));
  EXPECT_FALSE(without.count("agg.pos") || without.count("inf.pos"));
  EXPECT_EQ(with.size(), without.size() + 2);
  // Without a table only q and k carry position: a bidirectional Agg whose 2c inputs are one row
  // repeated has one value vector everywhere, so every output row is the same; the learned table
  // added to the inputs makes them differ.
  torch::manual_seed(15);
  torch::NoGradGuard no_grad;
  auto row = torch::randn({1, 1, 16});
  auto same = row.expand({1, 4, 16});
  auto y = rope->agg(same, same);
  EXPECT_TRUE(mixlab::testing::all_close(y, y.select(1, 0).unsqueeze(1).expand_as(y), 1e-5, 1e-6));
  auto y_learned = learned->agg(same, same);
  EXPECT_GT((y_learned - y_learned.select(1, 0).unsqueeze(1)).abs().max().item<double>(), 1e-3);
}

TEST(Tpsm, InitSetsTheWeightScale) {
  // GPT-2's residual scaling stays: proj and fc2 get init / sqrt(2 L).
  for (double init : {0.02, 0.1}) {
    SCOPED_TRACE(init);
    torch::manual_seed(16);
    auto m = make("c=8:inf_layers=2:init=" + std::to_string(init), 64, 4);
    auto params = m->named_parameters();
    auto std_of = [&](const char* name) { return params[name].std().item<double>(); };
    EXPECT_NEAR(std_of("inf.block0_qkv.weight"), init, 0.05 * init);
    EXPECT_NEAR(std_of("agg.block0_fc1.weight"), init, 0.05 * init);
    EXPECT_NEAR(std_of("inf.block1_fc2.weight"), init / 2.0, 0.05 * init);  // L = 2: sqrt(2L) = 2
    EXPECT_NEAR(std_of("inf.pos"), init, 0.1 * init);
  }
}

TEST(Tpsm, ForwardIsCausalAcrossChunkPadding) {
  torch::manual_seed(14);
  auto m = make("c=5");
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 23, 16});
  auto y = m->forward(x);
  for (int64_t T : {1, 4, 5, 6, 12, 22}) {
    SCOPED_TRACE(T);
    EXPECT_TRUE(mixlab::testing::all_close(m->forward(x.narrow(1, 0, T)), y.narrow(1, 0, T), 1e-5, 1e-5));
  }
  auto x2 = x.clone();
  x2.select(1, 11).add_(torch::randn({2, 16}));  // not a constant: LayerNorm removes those
  auto y2 = m->forward(x2);
  EXPECT_TRUE(torch::equal(y2.narrow(1, 0, 11), y.narrow(1, 0, 11)));
  EXPECT_FALSE(torch::allclose(y2.select(1, 11), y.select(1, 11)));
  EXPECT_FALSE(torch::allclose(y2.select(1, 20), y.select(1, 20)));  // later chunk sees it through Agg
}

TEST(Tpsm, StateHoldsPopcountRootsAndCountsItsBytes) {
  torch::manual_seed(15);
  const int64_t B = 2, c = 3, d = 16;
  auto m = make("c=3");
  torch::NoGradGuard no_grad;
  auto state = m->init_state(B);
  auto& s = static_cast<TpsmState&>(*state);
  const int64_t slab = B * c * d * static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(s.bytes(), slab);  // the chunk buffer only
  // Autograd is off, so step takes the fast path, which allocates Inf's key/value cache on its
  // first step and keeps it: B x L_inf (1) x 2c positions x [k | v] (2d), i.e. 4 slabs, fixed.
  const int64_t cache = B * 1 * (2 * c) * (2 * d) * static_cast<int64_t>(sizeof(float));
  for (int64_t t = 1; t <= 3 * 70; ++t) {
    m->step(s, torch::randn({B, d}));
    const int64_t chunks = t / c;
    ASSERT_EQ(s.chunks(), chunks);
    ASSERT_EQ(s.roots(), popcount(chunks)) << "after " << chunks << " chunks";
    ASSERT_LE(s.roots(), static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(chunks + 1)))));
    // One root and one cached fold per occupied level, plus the buffer and the fixed cache.
    ASSERT_EQ(s.bytes(), (2 * popcount(chunks) + 1) * slab + cache);
    // Merges (chunks - popcount) plus one fold per chunk: amortised <= 2 Agg calls per chunk.
    ASSERT_EQ(s.agg_calls(), 2 * chunks - popcount(chunks));
  }
}

TEST(Tpsm, ScanIsBatchedPerTreeLevel) {
  torch::manual_seed(16);
  auto m = make("c=2");
  torch::NoGradGuard no_grad;
  for (int64_t r : {1, 2, 3, 17, 64, 100}) {
    SCOPED_TRACE(r);
    m->forward(torch::randn({1, 2 * r - 1, 16}));
    const auto& st = m->last_scan_stats();
    EXPECT_EQ(st.chunks, r);
    const int64_t leaves = r - 1;
    int64_t levels = 0;
    while ((int64_t{1} << levels) < leaves + 1) ++levels;
    EXPECT_LE(st.agg_calls, 2 * leaves);
    EXPECT_GE(st.agg_calls, leaves);  // at least one Agg per prefix beyond P_0
    EXPECT_LE(st.batched_levels, 2 * levels);
    if (r == 100) EXPECT_GE(st.max_agg_batch, 32);  // a level really is one call
  }
}

TEST(Tpsm, SaveMidStreamLoadAndContinueIsBitwiseEqual) {
  torch::manual_seed(17);
  auto m = make("c=4:identity=learned");
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 61, 16});
  auto a = m->init_state(2);
  stream(*m, *a, x.narrow(1, 0, 23));  // 5 chunks + 3 buffered tokens
  const std::string path = temp_path("state.bin");
  m->save_state(static_cast<TpsmState&>(*a), path);
  auto b = m->load_state(path);
  EXPECT_EQ(b->position(), 23);
  EXPECT_EQ(b->roots(), popcount(5));
  // Inf's key/value cache (B x L_inf x 2c x 2d floats) is derived, not saved: the loaded state
  // holds it again after its first step.
  const int64_t cache = 2 * 1 * 8 * 32 * static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(b->bytes(), a->bytes() - cache);
  auto ya = stream(*m, *a, x.narrow(1, 23, 38));
  auto yb = stream(*m, *b, x.narrow(1, 23, 38));
  EXPECT_TRUE(torch::equal(ya, yb));
  EXPECT_EQ(b->bytes(), a->bytes());

  // Every single flipped byte is caught (checksum, magic or version).
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string bad = temp_path("corrupt.bin");
  for (size_t pos : {size_t{3}, size_t{9}, bytes.size() / 2, bytes.size() - 20, bytes.size() - 1}) {
    SCOPED_TRACE(pos);
    auto copy = bytes;
    copy[pos] ^= 0x5a;
    std::ofstream(bad, std::ios::binary).write(copy.data(), static_cast<std::streamsize>(copy.size()));
    EXPECT_THROW(m->load_state(bad), mixlab::Error);
  }
  auto copy = bytes;
  copy[bytes.size() / 2] ^= 1;
  std::ofstream(bad, std::ios::binary).write(copy.data(), static_cast<std::streamsize>(copy.size()));
  expect_error([&] { m->load_state(bad); }, {"corrupt.bin", "checksum"});
  std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), 40);
  expect_error([&] { m->load_state(bad); }, "corrupt.bin");
  expect_error([&] { m->load_state(temp_path("missing.bin")); }, {"missing.bin", "cannot open"});
  // A state of another configuration is refused.
  auto other = make("c=4:identity=zeros");
  expect_error([&] { other->load_state(path); }, {"saved for mixer", "identity=learned"});
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST(Tpsm, SpecIsCanonicalAndRoundTrips) {
  auto m = make("compress=linear:c=8:inf_layers=2");
  EXPECT_EQ(m->spec(),
            "tpsm:c=8:agg_d=16:inf_d=16:agg_heads=2:agg_layers=1:inf_heads=2:inf_layers=2:compress=linear:"
            "identity=zeros:pos=learned:init=0.02:inf=gpt2:agg=gpt2:compress_init=right_half");
  auto again = make(m->spec().substr(5));
  EXPECT_EQ(again->spec(), m->spec());
}

TEST(Tpsm, BadInputErrorsNameTheArgument) {
  expect_error([] { make("c=0"); }, {"tpsm key 'c'", "[1, ", "got 0"});
  expect_error([] { make("agg_d=8:inf_d=16"); }, {"agg_d and inf_d must be equal", "agg_d = 8", "inf_d = 16"});
  expect_error([] { make("agg_heads=3"); }, {"tpsm Agg", "heads must divide", "heads = 3"});
  expect_error([] { make("c=4:bogus=1"); }, {"unknown tpsm key 'bogus'"});
  expect_error([] { make("compress=mean"); }, {"'compress' must be right_half or linear", "mean"});
  expect_error([] { make("pos=alibi"); }, {"'pos' must be learned or rope", "alibi"});
  expect_error([] { make("identity=one"); }, {"'identity' must be zeros, learned or empty", "one"});
  expect_error([] { make("inf=mlp"); }, {"'inf' must be gpt2 or attention", "mlp"});
  expect_error([] { make("agg=mlp"); }, {"'agg' must be gpt2 or attention", "mlp"});
  expect_error([] { make("compress=linear:compress_init=eye"); }, {"'compress_init' must be right_half or sum", "eye"});
  expect_error([] { make("compress_init=sum"); }, {"compress_init=sum needs compress=linear"});
  expect_error([] { make("init=0"); }, {"tpsm key 'init'", "0"});
  expect_error([] { make("init=2"); }, {"tpsm key 'init'", "2"});
  // d 6 over 2 heads: rotary positions rotate channel pairs, a head width of 3 has none.
  expect_error([] { make("d=6:agg_heads=2:inf_heads=2:pos=rope"); }, {"tpsm Agg", "even head width", "got 3"});
  expect_error([] { make("c=4:c=5"); }, "given twice");
  expect_error([] { make("c"); }, "key=value");
  auto m = make("c=4");
  expect_error([&] { m->forward(torch::randn({2, 5, 15})); }, {"x must be (B,T,C)", "C = 16", "[2,5,15]"});
  expect_error([&] { m->forward(torch::randn({2, 0, 16})); }, "T >= 1");
  auto state = m->init_state(2);
  expect_error([&] { m->step(*state, torch::randn({3, 16})); }, {"x_t must be (B,C)", "[3,16]"});
}

// The count a spec's sizes are checked with before anything is allocated (tpsm_parameter_count)
// is the count of the tensors the constructor then makes, for every option that adds or removes
// one; a size over the budget is an error that names the keys, not an allocation of terabytes.
TEST(Tpsm, ParameterCountIsCountedBeforeBuildingAndSizesOverTheBudgetAreRefused) {
  for (const std::string args :
       {"c=4", "c=8:compress=linear:identity=learned", "d=32:agg_heads=4:inf_heads=4:agg_layers=2",
        "c=4:pos=rope:inf=attention:agg=attention",
        "c=3:compress=linear:compress_init=sum:identity=empty:inf_layers=3"}) {
    auto m = make(args);
    int64_t held = 0;
    for (const auto& p : m->parameters()) held += p.numel();
    for (const auto& b : m->buffers()) held += b.numel();  // the identity's zeros
    EXPECT_EQ(mixlab::tpsm_parameter_count(mixlab::tpsm_options_parse(args), dims()), static_cast<double>(held))
        << args;
  }
  // The fuzzer's find: a 15-million width at C = 16 (12·d² per layer, about 5e15 parameters).
  expect_error([] { make("d=00000000000014993680"); },
               {"tpsm", "parameters", "at model width C = 16", "agg_d = inf_d = 14993680"});
  expect_error([] { make("c=16777216:compress=linear"); }, {"tpsm", "the chunk c (16777216)"});
  expect_error([] { make("agg_layers=16777216"); }, {"tpsm", "agg_layers (16777216)"});
  // No weight grows with c under rotary positions and right-half compression, but the identity's
  // buffer of c x d zeros does.
  expect_error([] { make("c=16777216:pos=rope"); }, {"tpsm", "parameters and buffers", "the chunk c (16777216)"});
  // At the budget's edge at C = 16 (2^24): 256 Agg layers of width 64 fit, 512 do not.
  EXPECT_LT(mixlab::tpsm_parameter_count(mixlab::tpsm_options_parse("d=64:agg_layers=256"), dims()), 16777216.0);
  EXPECT_GT(mixlab::tpsm_parameter_count(mixlab::tpsm_options_parse("d=64:agg_layers=512"), dims()), 16777216.0);
  expect_error([] { make("d=64:agg_layers=512"); }, {"tpsm", "agg_layers (512)"});
}

}  // namespace tpsm_test
