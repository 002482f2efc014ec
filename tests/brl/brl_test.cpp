// BRL-Attention: spec errors, fast forward/backward vs the dense reference (every σ, diff on and
// off, awkward T; the first layer's expanded memory), finite-difference gradients in double,
// block causality, what the compressed tokens reach, decode == forward, constant cache.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/brl/brl_reference.h"
#include "mixlab/core/error.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixlab {
namespace brl_test {
namespace {

using testing::all_close;

MixerDims dims(int64_t C = 8, int64_t H = 2) {
  MixerDims d;
  d.d_model = C;
  d.n_heads = H;
  d.max_len = 512;
  return d;
}

std::shared_ptr<BrlMixer> make(const std::string& args, MixerDims d = dims()) {
  return std::dynamic_pointer_cast<BrlMixer>(brl_mixer_create("brl:" + args, args, d));
}

TEST(BrlSpec, DefaultsAndKeys) {
  auto o = brl_options_parse("brl", "");
  EXPECT_EQ(o.window, 8);
  EXPECT_EQ(o.slots, 8);
  EXPECT_EQ(o.block, 8);  // block defaults to w
  EXPECT_EQ(o.hist, 8);   // hist defaults to block
  EXPECT_EQ(brl_options_parse("s", "w=4:block=3").hist, 3);
  EXPECT_EQ(brl_options_parse("s", "w=4:hist=12").hist, 12);
  EXPECT_TRUE(o.diff);
  o = brl_options_parse("s", "w=5:m=3:block=7:beta=0.25:lambda=0.1:attn=relu2:diff=0");
  EXPECT_EQ(o.window, 5);
  EXPECT_EQ(o.slots, 3);
  EXPECT_EQ(o.block, 7);
  EXPECT_DOUBLE_EQ(o.beta, 0.25);
  EXPECT_DOUBLE_EQ(o.lambda, 0.1);
  EXPECT_EQ(o.attn, BrlAttn::kRelu2);
  EXPECT_FALSE(o.diff);
  // hist is named only when it is not one block: states saved before it existed name their mixer so.
  EXPECT_EQ(make("w=4:m=2")->spec(), "brl:w=4:m=2:block=4:beta=0.5:lambda=0.5:attn=softmax:diff=1");
  EXPECT_EQ(make("w=4:m=2:hist=4")->spec(), "brl:w=4:m=2:block=4:beta=0.5:lambda=0.5:attn=softmax:diff=1");
  EXPECT_EQ(make("w=4:m=2:hist=8")->spec(), "brl:w=4:m=2:block=4:hist=8:beta=0.5:lambda=0.5:attn=softmax:diff=1");
}

TEST(BrlSpec, ErrorsNameTheKey) {
  auto bad = [](const std::string& args, std::vector<std::string> frags) {
    frags.push_back("brl:" + args);
    expect_error([&] { brl_options_parse("brl:" + args, args); }, frags);
  };
  bad("w=0", {"'w'", "positive integer", "got 0"});
  bad("w=-3", {"'w'", "positive integer"});
  bad("m=0", {"'m'", "positive integer"});
  bad("w=4:m=x", {"'m'", "integer", "'x'"});
  bad("beta=1.5", {"'beta'", "[0, 1]", "1.5"});
  bad("beta=-0.1", {"'beta'", "[0, 1]"});
  bad("beta=abc", {"'beta'", "must be a number"});
  bad("foo=1", {"unknown brl key 'foo'", "known: w, m"});
  bad("attn=gelu", {"'attn'", "softmax, laplace or relu2", "'gelu'"});
  bad("diff=2", {"'diff'", "0 or 1"});
  bad("w", {"key=value", "'w'"});
  bad("w=3:w=4", {"'w'", "twice"});
  bad("block=0", {"'block'", "positive integer"});
  bad("hist=0", {"'hist'", "positive integer"});
  bad("w=4:hist=6", {"'hist'", "multiple of the block (4)", "got 6"});
}

// forward_memory against brl_reference_forward in double: y, the memory, and the gradients of
// `inputs` and of every parameter under the same random upstream gradients.
void expect_matches_reference(BrlMixer& mixer, const torch::Tensor& x, const torch::Tensor& mem,
                              std::vector<torch::Tensor> inputs) {
  auto fast = mixer.forward_memory(x, mem);
  auto ref = brl_reference_forward(mixer, x, mem);
  EXPECT_TRUE(all_close(fast.y, ref.y, 1e-9, 1e-10));
  EXPECT_TRUE(all_close(fast.memory_delta, ref.memory_delta, 1e-9, 1e-10));
  auto gy = torch::randn_like(fast.y), gm = torch::randn_like(fast.memory_delta);
  for (const auto& p : mixer.parameters()) inputs.push_back(p);
  auto g_fast = torch::autograd::grad({fast.y, fast.memory_delta}, inputs, {gy, gm}, false, false, true);
  auto g_ref = torch::autograd::grad({ref.y, ref.memory_delta}, inputs, {gy, gm}, false, false, true);
  ASSERT_EQ(g_fast.size(), g_ref.size());
  for (size_t i = 0; i < g_fast.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_EQ(g_fast[i].defined(), g_ref[i].defined());
    if (g_fast[i].defined()) EXPECT_TRUE(all_close(g_fast[i], g_ref[i], 1e-8, 1e-10));
  }
}

struct Case {
  std::string args;
  int64_t T;
};

// Fast path vs the dense reference, forward (y and the memory update) and backward (x, memory
// and every parameter), in double.
TEST(BrlMixer, ForwardAndBackwardMatchReference) {
  const std::vector<Case> cases = {
      {"w=3:m=3:block=4", 1},
      {"w=3:m=3:block=4", 7},
      {"w=3:m=3:block=4", 16},
      {"w=2:m=5:block=3:attn=laplace", 13},
      {"w=4:m=2:block=5:attn=relu2", 11},
      {"w=3:m=3:block=4:diff=0", 9},
      {"w=1:m=1:block=1:beta=0", 5},
      {"w=6:m=4:block=2:beta=1", 9},
      // Several history blocks: short histories at the start, then the full one (h 3).
      {"w=3:m=3:block=4:hist=12", 23},
      {"w=3:m=3:block=4:hist=12", 9},
      {"w=2:m=5:block=3:hist=6:attn=laplace", 13},
      {"w=4:m=2:block=2:hist=8:attn=relu2:diff=0", 11},
      {"w=3:m=3:block=4:hist=8:diff=0", 17},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args + " T=" + std::to_string(c.T));
    torch::manual_seed(7);
    auto mixer = make(c.args);
    mixer->to(torch::kDouble);
    const int64_t B = 2;
    auto x = torch::randn({B, c.T, 8}, torch::kDouble).requires_grad_(true);
    auto mem =
        (torch::randn({B, mixer->blocks_for(c.T), mixer->options().slots, 8}, torch::kDouble)).requires_grad_(true);
    expect_matches_reference(*mixer, x, mem, {x, mem});
  }
}

// The first layer's memory is ct0 expanded over (batch, block) with stride 0 (memory_init); the
// fast forward maps ct0's rows once and expands them (map_rows). Against the dense reference on
// the same expanded memory: outputs and the gradients of x and of every parameter, ct0 included.
TEST(BrlMixer, ExpandedFirstLayerMemoryMatchesReference) {
  for (const std::string args : {"w=3:m=3:block=4", "w=3:m=3:block=4:hist=12", "w=2:m=5:block=3:attn=laplace",
                                 "w=3:m=3:block=4:diff=0:beta=0.7"}) {
    SCOPED_TRACE(args);
    torch::manual_seed(8);
    auto mixer = make(args);
    mixer->to(torch::kDouble);
    for (const int64_t B : {3, 1}) {
      const int64_t T = 21;
      auto x = torch::randn({B, T, 8}, torch::kDouble).requires_grad_(true);
      auto mem = mixer->memory_init(B, T);
      ASSERT_EQ(mem.stride(0), 0);
      ASSERT_EQ(mem.stride(1), 0);
      expect_matches_reference(*mixer, x, mem, {x});
    }
  }
}

TEST(BrlMixer, GradcheckInDouble) {
  for (const char* args : {"w=2:m=2:block=3", "w=2:m=2:block=3:attn=laplace:diff=0", "w=2:m=2:block=2:hist=4"}) {
    SCOPED_TRACE(args);
    torch::manual_seed(11);
    auto mixer = make(args);
    mixer->to(torch::kDouble);
    auto x = torch::randn({1, 7, 8}, torch::kDouble).requires_grad_(true);
    auto mem = torch::randn({1, mixer->blocks_for(7), 2, 8}, torch::kDouble).requires_grad_(true);
    EXPECT_TRUE(testing::gradcheck(
        [&](const std::vector<torch::Tensor>& in) {
          auto out = mixer->forward_memory(in[0], in[1]);
          return torch::cat({out.y.flatten(), out.memory_delta.flatten()});
        },
        {x, mem}));
  }
}

// Perturbing token t changes no output before t, and no memory of a block that starts at or
// before t's block (block k's memory reads blocks < k only).
TEST(BrlMixer, BlockCausal) {
  torch::manual_seed(3);
  auto mixer = make("w=3:m=2:block=4:attn=softmax");
  torch::NoGradGuard no_grad;
  const int64_t T = 19, N = 4;
  auto x = torch::randn({2, T, 8});
  auto mem = mixer->memory_init(2, T);
  auto base = mixer->forward_memory(x, mem);
  for (int64_t t : {0, 3, 4, 9, 15, 18}) {
    auto xp = x.clone();
    xp.select(1, t).add_(torch::randn({2, 8}));
    auto out = mixer->forward_memory(xp, mem);
    if (t > 0) EXPECT_TRUE(torch::equal(out.y.narrow(1, 0, t), base.y.narrow(1, 0, t))) << "t=" << t;
    EXPECT_FALSE(torch::allclose(out.y.select(1, t), base.y.select(1, t))) << "t=" << t;
    const int64_t kb = t / N + 1;  // first block whose memory may see token t
    EXPECT_TRUE(torch::equal(out.memory_delta.narrow(1, 0, kb), base.memory_delta.narrow(1, 0, kb))) << "t=" << t;
  }
}

// A sequence within one block has no history, so the block's length changes no output, and the
// forward pads to T, not to the block: block 2^24 (brl:w=2^24 defaults its block to w) once
// padded each sequence to 2^24 rows and asked the block attention for 137 GB. The check is the
// process's peak resident memory: padded, this test's one input (2 x 2^24 x 8 floats) is 1 GiB.
TEST(BrlMixer, ABlockLongerThanTheSequenceCostsTheSequence) {
  auto peak_rss_mib = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
  };
  const double peak_before = peak_rss_mib();
  for (const std::string attn : {"softmax", "relu2"}) {
    torch::manual_seed(5);
    auto small = make("w=4:m=2:block=16:attn=" + attn);
    auto huge = make("w=4:m=2:block=16777216:attn=" + attn);
    {
      torch::NoGradGuard no_grad;
      auto from = small->named_parameters();
      for (auto& p : huge->named_parameters()) p.value().copy_(from[p.key()]);
    }
    auto x = torch::randn({2, 12, 8});
    auto a = small->forward_memory(x, small->memory_init(2, 12));
    auto b = huge->forward_memory(x, huge->memory_init(2, 12));
    EXPECT_TRUE(torch::allclose(a.y, b.y, 1e-6, 1e-6)) << attn;
    EXPECT_TRUE(torch::allclose(a.memory_delta, b.memory_delta, 1e-6, 1e-6)) << attn;
  }
  EXPECT_LT(peak_rss_mib() - peak_before, 128.0) << "the forward allocated the block's rows, not the sequence's";
}

// A decode state holds the last hist inputs of each sequence by definition; when that memory
// cannot be had, init_state says what asked for it (hist, the batch, the bytes) as an I/O error
// (the CLI's out-of-memory exit), not as the allocator's message. Here 2^24 x 2^24 x 8 floats,
// 2^53 bytes, which no allocator grants. Skipped under AddressSanitizer, whose allocator aborts
// on a request that size instead of failing it.
TEST(BrlMixer, ADecodeStateTooLargeToHoldNamesHist) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan aborts on an allocation of 2^53 bytes";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan aborts on an allocation of 2^53 bytes";
#endif
#endif
  auto mixer = make("w=4:m=2:block=16:hist=16777216");
  try {
    mixer->init_state(int64_t{1} << 24);
    ADD_FAILURE() << "a 2^53-byte decode state must not be granted";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("hist = 16777216 inputs of each of the 16777216 sequences"), std::string::npos) << what;
    EXPECT_NE(what.find("9.01e+06 GB"), std::string::npos) << what;
    EXPECT_NE(what.find("lower hist"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

// One layer: token t hears token j through F_gen iff t-j <= W, and through the compressed tokens
// iff j lies in the block just before t's block. So the reach goes beyond the window, and the
// single-layer memory is exactly the previous block (the stack extends it per layer).
TEST(BrlMixer, CompressedTokensReachThePreviousBlock) {
  torch::manual_seed(4);
  auto mixer = make("w=2:m=3:block=6");
  const int64_t T = 18, N = 6, W = 2;
  auto x = torch::randn({1, T, 8}).requires_grad_(true);
  auto y = mixer->forward_memory(x, mixer->memory_init(1, T)).y;
  const int64_t t = 15;  // block 2, history = block 1 (positions 6..11)
  auto g = torch::autograd::grad({y.select(1, t).sum()}, {x})[0].abs().sum(-1).squeeze(0);  // (T)
  for (int64_t j = 0; j < T; ++j) {
    const bool in_window = j <= t && t - j <= W, in_block = j / N == t / N, in_history = j / N == t / N - 1;
    // Within t's own block F_prop's query is token t only, so only the window and history count.
    const bool expected = in_window || in_history || (in_block && j == t);
    EXPECT_EQ(g[j].item<double>() > 0, expected) << "j=" << j;
  }
}

// With hist = 3 blocks the compressed tokens of block k read blocks k-3..k-1: one layer lets a
// token read the W tokens before it and the hist tokens before its block, nothing earlier.
TEST(BrlMixer, HistoryOfSeveralBlocksExtendsTheReach) {
  for (const char* attn : {"softmax", "laplace"}) {
    SCOPED_TRACE(attn);
    torch::manual_seed(4);
    auto mixer = make(std::string("w=2:m=3:block=4:hist=12:attn=") + attn);
    const int64_t T = 26, N = 4, W = 2, h = 3;
    auto x = torch::randn({1, T, 8}).requires_grad_(true);
    auto y = mixer->forward_memory(x, mixer->memory_init(1, T)).y;
    for (int64_t t : {5, 9, 21, 25}) {
      auto g = torch::autograd::grad({y.select(1, t).sum()}, {x}, {}, /*retain_graph=*/true)[0].abs().sum(-1).squeeze(
          0);  // (T)
      for (int64_t j = 0; j < T; ++j) {
        const bool in_window = j <= t && t - j <= W;
        const bool in_history = j / N < t / N && j / N >= t / N - h;
        EXPECT_EQ(g[j].item<double>() > 0, in_window || in_history || j == t) << "t=" << t << " j=" << j;
      }
    }
  }
}

TEST(BrlMixer, StepEqualsForwardRowByRow) {
  for (const char* args : {"w=3:m=2:block=4", "w=5:m=3:block=3:attn=relu2:diff=0", "w=2:m=2:block=7:attn=laplace",
                           "w=3:m=2:block=4:hist=12", "w=2:m=3:block=3:hist=6:attn=relu2"}) {
    SCOPED_TRACE(args);
    torch::manual_seed(5);
    auto mixer = make(args);
    torch::NoGradGuard no_grad;
    const int64_t B = 3, T = 23, N = mixer->block();
    auto x = torch::randn({B, T, 8});
    auto mem = torch::randn({B, mixer->blocks_for(T), mixer->options().slots, 8});
    auto full = mixer->forward_memory(x, mem);
    auto state = mixer->init_state(B);
    for (int64_t t = 0; t < T; ++t) {
      auto out = mixer->step_memory(*state, x.select(1, t), mem.select(1, t / N));
      EXPECT_TRUE(all_close(out.y, full.y.select(1, t), 1e-4, 1e-5)) << "t=" << t;
      ASSERT_EQ(out.memory_delta.defined(), t % N == 0) << "t=" << t;
      if (out.memory_delta.defined())
        EXPECT_TRUE(all_close(out.memory_delta, full.memory_delta.select(1, t / N), 1e-4, 1e-5)) << "t=" << t;
    }
    EXPECT_EQ(state->position(), T);
    // The plain Mixer interface (own initial memory) agrees too.
    auto y = mixer->forward(x);
    auto s2 = mixer->init_state(B);
    for (int64_t t = 0; t < T; ++t)
      EXPECT_TRUE(all_close(mixer->step(*s2, x.select(1, t)), y.select(1, t), 1e-4, 1e-5));
  }
}

// Without autograd step computes F_prop, the sum and the block buffer, and at block boundaries
// F_comp, the evolution and F_prop's keys/values, on raw rows; with autograd on, the ATen ops. Token by token (across
// block boundaries) the outputs, memory deltas and states agree, for every σ and diff on and off, in float and double,
// on odd sizes (C 12, H 3).
TEST(BrlMixer, RawRowStepEqualsAtenStep) {
  for (const char* args : {"w=3:m=2:block=4", "w=5:m=3:block=3:attn=relu2:diff=0", "w=2:m=5:block=7:attn=laplace",
                           "w=3:m=2:block=4:hist=12"}) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(std::string(args) + (dtype == torch::kFloat ? " float" : " double"));
      torch::manual_seed(8);
      auto mixer = make(args, dims(12, 3));
      mixer->to(dtype);
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
      const int64_t B = 3, T = 23, N = mixer->block();
      auto x = torch::randn({B, T, 12}, dtype);
      auto mem = torch::randn({B, mixer->blocks_for(T), mixer->options().slots, 12}, dtype);
      auto fast = mixer->init_state(B), aten = mixer->init_state(B);
      auto& sf = dynamic_cast<BrlState&>(*fast);
      auto& sa = dynamic_cast<BrlState&>(*aten);
      for (int64_t t = 0; t < T; ++t) {
        MemoryOutput of;
        {
          torch::NoGradGuard no_grad;
          if (t % N == 0) ASSERT_TRUE(mixer->boundary_on_rows(mem.select(1, t / N), sf)) << "t=" << t;
          of = mixer->step_memory(sf, x.select(1, t), mem.select(1, t / N));
          // (Asked after the step: the keys/values it reads are set at the block boundary.)
          ASSERT_TRUE(mixer->decodes_on_rows(x.select(1, t), sf)) << "the raw-row path was not taken, t=" << t;
        }
        ASSERT_FALSE(mixer->decodes_on_rows(x.select(1, t), sf)) << "autograd on: the ATen path";
        ASSERT_FALSE(mixer->boundary_on_rows(mem.select(1, t / N), sf)) << "autograd on: the ATen path";
        auto oa = mixer->step_memory(sa, x.select(1, t), mem.select(1, t / N));
        ASSERT_TRUE(all_close(of.y, oa.y.detach(), tol, tol))
            << "t=" << t << " max diff " << (of.y - oa.y).abs().max().item<double>();
        ASSERT_EQ(of.memory_delta.defined(), oa.memory_delta.defined());
        if (of.memory_delta.defined()) ASSERT_TRUE(all_close(of.memory_delta, oa.memory_delta.detach(), tol, tol));
        ASSERT_TRUE(all_close(sf.block_inputs, sa.block_inputs.detach(), tol, tol)) << "t=" << t;
        ASSERT_TRUE(all_close(sf.prop_k, sa.prop_k.detach(), tol, tol)) << "t=" << t;
        ASSERT_TRUE(all_close(sf.prop_v, sa.prop_v.detach(), tol, tol)) << "t=" << t;
        ASSERT_EQ(sf.position(), t + 1);
      }
    }
  }
}

// The decode cache is the window + hist inputs + the m compressed keys/values: the same bytes
// after 3 blocks and after 40, and exactly that sum.
TEST(BrlMixer, DecodeCacheIsConstantInContextLength) {
  for (int64_t hist : {4, 12}) {
    SCOPED_TRACE(hist);
    torch::manual_seed(6);
    const int64_t B = 2, C = 8, W = 3, M = 2, N = 4;
    auto mixer = make("w=3:m=2:block=4:hist=" + std::to_string(hist));
    torch::NoGradGuard no_grad;
    auto state = mixer->init_state(B);
    int64_t at_short = 0;
    for (int64_t t = 0; t < 40 * N; ++t) {
      mixer->step(*state, torch::randn({B, C}));
      if (t + 1 == 3 * N) at_short = state->bytes();
    }
    EXPECT_EQ(state->bytes(), at_short);
    const int64_t f = sizeof(float);
    EXPECT_EQ(state->bytes(), f * B * (2 * W * C + hist * C + 2 * M * C));
    EXPECT_EQ(state->cached_positions(), W);
  }
}

TEST(BrlMixer, RejectsBadInput) {
  auto mixer = make("w=2:m=2:block=3");
  expect_error([&] { mixer->forward(torch::randn({2, 5, 7})); }, {"brl forward", "x", "(B,T,C)"});
  expect_error([&] { mixer->forward(torch::randn({5, 8})); }, {"brl forward", "x"});
  expect_error(
      [&] {
        mixer->forward_memory(torch::randn({1, 7, 8}), torch::randn({1, 2, 2, 8}));
      },
      {"brl forward", "memory", "(B,K,M,C)"});
  auto state = mixer->init_state(1);
  expect_error([&] { mixer->step(*state, torch::randn({2, 8})); }, {"brl step", "x_t"});
  expect_error([&] { make("w=2", dims(8, 3)); }, "divisible");
  BrlOptions o;
  o.window = 4;
  o.block = 4;
  o.hist = 6;
  expect_error([&] { BrlMixer(dims(), o); }, {"brl", "hist", "multiple of block (4)", "got 6"});
}

// brl_parameter_count, which the constructor checks before it allocates, is the count of what it
// then holds (diff adds tensors); a slot count over the budget is refused by name.
TEST(BrlMixer, ParameterCountIsCountedBeforeBuildingAndSlotsOverTheBudgetAreRefused) {
  for (const std::string args : {"w=4:m=2", "w=4:m=5:diff=1", "w=8:m=16:block=4:hist=8"}) {
    auto mixer = make(args);
    int64_t held = 0;
    for (const auto& p : mixer->parameters()) held += p.numel();
    for (const auto& b : mixer->buffers()) held += b.numel();
    EXPECT_EQ(brl_parameter_count(dims(), brl_options_parse("brl:" + args, args)), static_cast<double>(held)) << args;
  }
  expect_error([] { make("m=16777216", dims(16, 2)); },
               {"brl", "parameters", "at model width C = 16", "the slot count m (got 16777216)"});
}

}  // namespace
}  // namespace brl_test
}  // namespace mixlab
