// Task lm: sliding-window evaluation against a direct computation, training (loss falls, resume
// exact), sampling (greedy, top-k, top-p on fixed logits, seeded determinism) and generation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "mixlab/model/sampling.h"
#include "mixlab/train/generate.h"
#include "mixlab/train/lm_eval.h"
#include "mixlab/train/task_lm.h"
#include "mixlab/train/trainer.h"
#include "mixlab_test_paths.h"
#include "train_test_util.h"

namespace lm_test {

using namespace mixlab;

namespace {

// Every test here reads the shipped sample and writes caches into a temporary folder; the
// variables are read once per process, so they are set before the first dataset is opened.
struct LmEnvironment : ::testing::Environment {
  void SetUp() override {
    ::setenv("MIXLAB_DATA_DIR", MIXLAB_SOURCE_DIR "/data/sample", 1);
    // Per process: ctest runs the tests of this file in parallel processes, and a shared folder
    // removed by one of them would pull the cache from under another.
    dir = std::filesystem::path(::testing::TempDir()) / ("mixlab_lm_train_cache_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ::setenv("MIXLAB_CACHE_DIR", dir.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new LmEnvironment);

std::shared_ptr<DecoderModel> tiny_model(int64_t vocab, int64_t max_len) {
  torch::manual_seed(3);
  ModelDims d;
  d.vocab = vocab;
  d.d_model = 8;
  d.layers = 2;
  d.heads = 2;
  d.mlp_ratio = 2;
  d.max_len = max_len;
  return std::make_shared<DecoderModel>(d, test_mixer_factory());
}

TrainConfig lm_config() {
  nlohmann::json j = {{"task", "lm"},   {"length", 32},    {"d_model", 16},      {"heads", 2},
                      {"mlp_ratio", 2}, {"batch", 8},      {"steps", 40},        {"warmup", 4},
                      {"lr", 1e-2},     {"log_every", 10}, {"eval_tokens", 512}, {"eval_batch", 8}};
  return config_from_json(j, "test");
}

}  // namespace

TEST(LmEval, SlidingWindowEqualsDirectComputation) {
  const int64_t V = 11, N = 53;
  auto model = tiny_model(V, 16);
  model->eval();
  torch::manual_seed(5);
  const auto stream = torch::randint(0, V, {N}, torch::kInt64);
  std::vector<int64_t> bytes(V);
  for (int64_t v = 0; v < V; ++v) bytes[v] = 1 + v % 3;  // unequal byte lengths
  for (int64_t T : {16, 5}) {
    for (int64_t stride : {int64_t{1}, int64_t{3}, T}) {
      LmEvalOptions o;
      o.T = T;
      o.stride = stride;
      o.batch = 4;
      const LmEvalResult r = lm_evaluate(*model, stream, bytes, o);
      // Direct: each target t alone, from its stated context [c(t), t).
      double nll = 0;
      int64_t nbytes = 0;
      torch::NoGradGuard no_grad;
      for (int64_t t = 1; t < N; ++t) {
        const int64_t c = stride * std::max<int64_t>(0, (t - T + stride - 1) / stride);
        auto logits = model->forward(stream.slice(0, c, t).unsqueeze(0));  // (1, t-c, V)
        nll -=
            torch::log_softmax(logits[0][t - c - 1].to(torch::kFloat64), 0)[stream[t].item<int64_t>()].item<double>();
        nbytes += bytes[stream[t].item<int64_t>()];
      }
      EXPECT_EQ(r.tokens, N - 1);
      EXPECT_EQ(r.bytes, nbytes);
      EXPECT_NEAR(r.nll, nll, 1e-6 * std::abs(nll)) << "T " << T << " stride " << stride;
      EXPECT_NEAR(r.bits_per_byte(), nll / std::log(2.0) / static_cast<double>(nbytes), 1e-6);
      EXPECT_NEAR(r.perplexity(), std::exp(nll / (N - 1)), 1e-6 * r.perplexity());
    }
  }
  LmEvalOptions lim;
  lim.T = 16;
  lim.stride = 8;
  lim.limit = 20;
  EXPECT_EQ(lm_evaluate(*model, stream, bytes, lim).tokens, 19);
  lim.T = 17;
  expect_error_contains([&] { lm_evaluate(*model, stream, bytes, lim); }, "T must be in [1, max_len = 16]");
  lim.T = 16;
  expect_error_contains([&] { lm_evaluate(*model, stream, std::vector<int64_t>(3, 1), lim); }, "token_bytes");
  expect_error_contains([&] { lm_evaluate(*model, stream + V, bytes, lim); }, "stream ids must be in [0, 11)");
}

TEST(LmTrain, LossFallsAndEvaluationReportsBitsPerByte) {
  Trainer trainer(lm_config());
  EXPECT_EQ(trainer.model().dims().vocab, 256);
  TrainOptions o;
  o.progress = false;
  const EvalResult before = trainer.evaluate();
  const TrainResult r = trainer.run(o);
  EXPECT_LT(r.eval.loss, before.loss - 0.5) << before.loss << " -> " << r.eval.loss;
  EXPECT_LT(r.eval.loss, std::log(256.0));
  EXPECT_EQ(r.eval.answer_tokens, 511);  // eval_tokens 512: targets 1..511
  EXPECT_GT(r.eval.scored_bytes, 0);
  EXPECT_NEAR(r.eval.bits_per_byte, r.eval.loss * 511 / std::log(2.0) / static_cast<double>(r.eval.scored_bytes), 1e-9);
}

TEST(LmTrain, BatchesAreAPureFunctionOfSeedAndStep) {
  const TrainConfig c = lm_config();
  const Batch a = task_train_batch(c.task, 4, 7, c.steps, 1), b = task_train_batch(c.task, 4, 7, c.steps, 1);
  const Batch other = task_train_batch(c.task, 4, 8, c.steps, 1);
  EXPECT_TRUE(torch::equal(a.tokens, b.tokens));
  EXPECT_FALSE(torch::equal(a.tokens, other.tokens));
  EXPECT_EQ(a.mask.sum().item<double>(), 4 * 32);
  EXPECT_TRUE(torch::equal(a.tokens.slice(1, 1), a.targets.slice(1, 0, 31)));
}

TEST(LmConfig, VocabFollowsTheTokenizer) {
  EXPECT_EQ(lm_config().task.vocab, 256);
  EXPECT_EQ(config_from_json({{"task", "lm"}, {"tokenizer", "gpt2"}}, "t").task.vocab, 50257);
  EXPECT_EQ(config_from_json({{"task", "lm"}}, "t").task.length, 128);
  expect_error_contains(
      [] {
        config_from_json({{"task", "lm"}, {"vocab", 300}}, "t");
      },
      {"vocab must be the bytes tokenizer's vocabulary size 256, got 300"});
  expect_error_contains(
      [] {
        config_from_json({{"task", "lm"}, {"tokenizer", "bpe"}}, "t");
      },
      {"key 'tokenizer'", "bpe"});
  expect_error_contains(
      [] {
        config_from_json({{"task", "copy"}, {"tokenizer", "gpt2"}}, "t");
      },
      {"applies to task lm only"});
  expect_error_contains(
      [] {
        config_from_json({{"task", "lm"}, {"length", 8}, {"eval_stride", 9}}, "t");
      },
      {"eval_stride", "[0, length = 8]"});
  // The tied embedding counts once: gpt2 at d_model 64 has 50257 x 64 embedding parameters.
  TrainConfig g = config_from_json({{"task", "lm"}, {"tokenizer", "gpt2"}, {"batch", 1}, {"length", 1}}, "t");
  const double params = 50257.0 * 64 + 2 * (4 + 8) * 64.0 * 64;
  const double attention_scores = 2 * 1 * 4 * 1 * 1 * 4;  // L B H T T floats
  EXPECT_NEAR(config_memory_bytes(g), 16 * params + (6 + 8) * 2 * 64 * 4 + 3 * 50257 * 4 + attention_scores, 1.0);
}

TEST(Sampling, FixedLogits) {
  const auto logits = torch::tensor({1.0, 3.0, 2.0, 3.0, 0.0}, torch::kFloat32);
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(sampling_distribution(logits, greedy), (std::vector<double>{0, 1, 0, 0, 0}));  // tie: lowest id
  SamplingOptions full;
  const auto p = sampling_distribution(logits, full);
  double z = 0;
  for (double v : {1.0, 3.0, 2.0, 3.0, 0.0}) z += std::exp(v);
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(p[i], std::exp(logits[i].item<double>()) / z, 1e-12);
  SamplingOptions k2;
  k2.top_k = 2;
  EXPECT_EQ(sampling_distribution(logits, k2), (std::vector<double>{0, 0.5, 0, 0.5, 0}));
  SamplingOptions k3;
  k3.top_k = 3;
  const auto p3 = sampling_distribution(logits, k3);
  const double z3 = 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(p3[2], std::exp(2.0) / z3, 1e-12);
  EXPECT_EQ(p3[0], 0.0);
  EXPECT_EQ(p3[4], 0.0);
  // top-p: masses 0.3995, 0.3995, 0.1470, 0.0541, 0.0199 (sorted): p = 0.5 keeps two, p = 0.9 three.
  SamplingOptions p05;
  p05.top_p = 0.5;
  EXPECT_EQ(sampling_distribution(logits, p05), (std::vector<double>{0, 0.5, 0, 0.5, 0}));
  SamplingOptions p09;
  p09.top_p = 0.9;
  EXPECT_EQ(sampling_distribution(logits, p09), p3);
  SamplingOptions small;
  small.top_p = 0.01;  // at least one id
  EXPECT_EQ(sampling_distribution(logits, small), (std::vector<double>{0, 1, 0, 0, 0}));
  SamplingOptions hot;
  hot.temperature = 1e6;  // nearly uniform
  for (double v : sampling_distribution(logits, hot)) EXPECT_NEAR(v, 0.2, 1e-5);
  SamplingOptions cold;
  cold.temperature = 0.5;
  EXPECT_NEAR(sampling_distribution(logits, cold)[1],
              std::exp(6.0) / (std::exp(2.0) + 2 * std::exp(6.0) + std::exp(4.0) + 1.0), 1e-12);
  EXPECT_EQ(sampling_pick({0.25, 0, 0.75}, 0.0), 0);
  EXPECT_EQ(sampling_pick({0.25, 0, 0.75}, 0.25), 2);
  EXPECT_EQ(sampling_pick({0.25, 0, 0.75}, 0.999999), 2);
  SamplingOptions bad;
  bad.temperature = -1;
  expect_error_contains([&] { sampling_validate(bad); }, "--temperature must be >= 0 (0 = greedy), got -1");
  bad = {};
  bad.top_p = 0;
  expect_error_contains([&] { sampling_validate(bad); }, "--top-p must be in (0, 1]");
  bad = {};
  bad.top_k = -2;
  expect_error_contains([&] { sampling_validate(bad); }, "--top-k must be >= 0");
}

TEST(Sampling, SeededSamplerIsDeterministicAndFollowsTheDistribution) {
  const auto logits = torch::tensor({0.0, 1.0, 2.0}, torch::kFloat64);
  Sampler a(42), b(42), c(43);
  std::vector<int64_t> sa, sb, sc;
  std::vector<int64_t> counts(3, 0);
  for (int i = 0; i < 3000; ++i) {
    sa.push_back(a.next(logits, {}));
    sb.push_back(b.next(logits, {}));
    sc.push_back(c.next(logits, {}));
    ++counts[static_cast<size_t>(sa.back())];
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(counts[2] / 3000.0, std::exp(2.0) / z, 0.03);
  EXPECT_NEAR(counts[0] / 3000.0, 1 / z, 0.03);
}

TEST(Generate, StreamsDeterministicallyAndShiftsTheContext) {
  const LmTokenizer tok = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  auto model = tiny_model(256, 12);
  GenerateOptions o;
  o.prompt = "The";
  o.max_tokens = 20;  // 4 prompt tokens + 20 > max_len 12: context shifts
  o.seed = 9;
  std::string text1, text2;
  const GenerateStats s1 = generate_text(*model, tok, o, [&](const std::string& t) { text1 += t; });
  const GenerateStats s2 = generate_text(*model, tok, o, [&](const std::string& t) { text2 += t; });
  EXPECT_EQ(text1, text2);
  EXPECT_EQ(text1.size(), 20u);  // bytes: one byte per token
  EXPECT_EQ(s1.generated, 20);
  EXPECT_EQ(s1.prompt_tokens, 4);
  EXPECT_GE(s1.context_shifts, 1);
  EXPECT_GT(s1.state_bytes, 0);
  EXPECT_FALSE(s1.interrupted);
  // Greedy equals the argmax of a plain forward at every step (no context shift within 8 tokens).
  o.sampling.temperature = 0;
  o.max_tokens = 8;
  std::vector<int64_t> ids;
  generate_text(*model, tok, o, [&](const std::string& t) { ids.push_back(static_cast<unsigned char>(t[0])); });
  std::vector<int64_t> ctx = {10, 'T', 'h', 'e'};
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < 8; ++i) {
    auto logits = model->forward(torch::tensor(ctx, torch::kInt64).unsqueeze(0))[0][-1];
    const int64_t next = logits.argmax().item<int64_t>();
    EXPECT_EQ(ids[static_cast<size_t>(i)], next) << i;
    ctx.push_back(next);
  }
  // Empty prompt: starts from the separator; max_tokens 0 generates nothing; a stop flag stops.
  o.prompt = "";
  o.max_tokens = 0;
  std::string none;
  const GenerateStats s0 = generate_text(*model, tok, o, [&](const std::string& t) { none += t; });
  EXPECT_EQ(none, "");
  EXPECT_EQ(s0.prompt_tokens, 1);
  std::atomic<bool> stop{true};
  o.max_tokens = 5;
  EXPECT_TRUE(generate_text(
                  *model, tok, o, [](const std::string&) {}, &stop)
                  .interrupted);
  o.max_tokens = -1;
  expect_error_contains([&] { generate_text(*model, tok, o, [](const std::string&) {}); }, "--max-tokens must be >= 0");
  o.max_tokens = 1;
  o.prompt = std::string(12, 'a');
  expect_error_contains([&] { generate_text(*model, tok, o, [](const std::string&) {}); }, "--prompt is 13 tokens");
}

// A hybrid stack (one mixer spec per layer, mixlab/registry/layer_specs.h) generates through the
// same decode path: greedy text equals the argmax of a plain forward, and a context shift works.
TEST(Generate, HybridStackDecodesLikeItsForward) {
  const LmTokenizer tok = LmTokenizer::load(LmTokenizerKind::kBytes, "");
  torch::manual_seed(4);
  ModelDims d;
  d.vocab = 256;
  d.d_model = 8;
  d.layers = 2;
  d.heads = 2;
  d.mlp_ratio = 2;
  d.max_len = 12;
  DecoderModel model(d, mixer_factory_from_spec("ssm:4|local:4", d.layers));
  GenerateOptions o;
  o.prompt = "The";
  o.sampling.temperature = 0;
  o.max_tokens = 8;
  std::vector<int64_t> ids;
  generate_text(model, tok, o, [&](const std::string& t) { ids.push_back(static_cast<unsigned char>(t[0])); });
  std::vector<int64_t> ctx = {10, 'T', 'h', 'e'};
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < 8; ++i) {
    auto logits = model.forward(torch::tensor(ctx, torch::kInt64).unsqueeze(0))[0][-1];
    const int64_t next = logits.argmax().item<int64_t>();
    EXPECT_EQ(ids[static_cast<size_t>(i)], next) << i;
    ctx.push_back(next);
  }
  o.max_tokens = 20;  // 4 prompt tokens + 20 > max_len 12: context shifts
  EXPECT_GE(generate_text(model, tok, o, [](const std::string&) {}).context_shifts, 1);
}

}  // namespace lm_test
