// Format fixtures (issue 37 item 7): a checkpoint and decode states written in today's formats
// (checkpoint format version 2, decode-state format version 1) are kept in tests/data/formats/.
// Each must keep loading and give the outputs recorded when it was written, so a change that
// breaks reading files users already have fails here, not in their hands. A file of another
// version is refused with a message naming its version and the supported one
// (TrainTrainer.* in trainer_test.cpp: "version 3 is not supported"; decode_engine_test.cpp:
// "version 9", "reads version 1").
//
// When a format version changes on purpose, keep the old fixtures (and either keep reading them or
// test their refusal) and write the new ones with:
//   MIXLAB_WRITE_FIXTURES=1 ./build/tests/test_train --gtest_filter='FormatFixtures.*'
// The comparisons allow float rounding: the CI machine may run other ISA kernels than the writer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mixlab/registry/registry.h"
#include "mixlab/train/checkpoint.h"
#include "mixlab/train/trainer.h"
#include "mixlab_test_paths.h"

namespace mixlab {
namespace format_fixtures_test {
namespace {

const std::string kDir = MIXLAB_SOURCE_DIR "/tests/data/formats";

bool writing() {
  const char* env = std::getenv("MIXLAB_WRITE_FIXTURES");
  return env != nullptr && std::string(env) == "1";
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-4, 1e-5))
      << what << ": max difference " << (got - want).abs().max().item<double>();
}

// A hybrid stack, so that one checkpoint holds two families' weights and optimizer state.
TrainConfig fixture_config() {
  TrainConfig c;
  c.task.name = "copy";
  c.task.vocab = 12;
  c.task.length = 4;
  c.mixer = "ssm:4|attention";
  c.d_model = 16;
  c.layers = 2;
  c.heads = 2;
  c.mlp_ratio = 2;
  c.steps = 2;
  c.warmup = 1;
  c.batch = 4;
  c.eval_batches = 1;
  c.eval_batch = 4;
  c.seed = 5;
  return c;
}

TEST(FormatFixtures, CheckpointVersion2LoadsAndPredictsAsWritten) {
  at::set_num_threads(1);
  const std::string path = kDir + "/checkpoint_v2.pt", logits_path = kDir + "/checkpoint_v2_logits.pt";
  const torch::Tensor tokens = torch::arange(18, torch::kLong).remainder(12).reshape({2, 9});
  if (writing()) {
    std::filesystem::create_directories(kDir);
    Trainer t(fixture_config());
    TrainOptions o;
    o.progress = false;
    t.run(o);
    t.checkpoint_save(path);
    torch::NoGradGuard no_grad;
    torch::save(t.model().forward(tokens), logits_path);
  }
  const LoadedCheckpoint ck = checkpoint_read(path);
  EXPECT_EQ(ck.step, 2);
  EXPECT_EQ(ck.config.mixer, "ssm:4|attention");
  Trainer t(ck.config);
  t.checkpoint_load(ck);
  if (!writing()) {
    // Written before checkpoints held the loop's state (entry train_state, 2026-11-27): it loads
    // as a run with an empty log window, no skipped step and no early stop.
    EXPECT_EQ(t.loop_state().window_steps, 0);
    EXPECT_EQ(t.loop_state().skipped, 0);
    EXPECT_EQ(t.loop_state().stopped_step, 0);
  }
  torch::Tensor want;
  torch::load(want, logits_path);
  torch::NoGradGuard no_grad;
  expect_close(t.model().forward(tokens), want, "logits of " + path);
}

// One decode state per family: the state after 5 tokens, and the output of the 6th token.
TEST(FormatFixtures, DecodeStatesVersion1LoadAndStepAsWritten) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  const std::vector<std::pair<std::string, std::string>> specs = {
      {"attention", "attention"}, {"local4", "local:4"}, {"ssm4", "ssm:4"},
      {"pow2", "resolvent:pow2"}, {"gla", "gla"},        {"deltanet", "deltanet"},
      {"toeplitz", "toeplitz"},   {"tpsm", "tpsm:c=2"},  {"brl", "brl:w=4:m=2:block=4"}};
  MixerDims dims;
  dims.d_model = 16;
  dims.n_heads = 2;
  dims.max_len = 64;
  for (const auto& [name, spec] : specs) {
    SCOPED_TRACE(spec);
    torch::manual_seed(0);
    MixerPtr mixer = mixer_create(spec, dims);
    torch::manual_seed(1);
    const torch::Tensor x = torch::randn({1, 6, 16});
    const std::string path = kDir + "/state_v1_" + name + ".bin", y_path = kDir + "/state_v1_" + name + "_y.pt";
    if (writing()) {
      auto state = mixer->init_state(1);
      for (int64_t t = 0; t < 5; ++t) mixer->step(*state, x.select(1, t));
      mixer->save_file(*state, path);
      torch::save(mixer->step(*state, x.select(1, 5)), y_path);
    }
    auto loaded = mixer->load_file(path);
    EXPECT_EQ(loaded->position(), 5);
    torch::Tensor want;
    torch::load(want, y_path);
    expect_close(mixer->step(*loaded, x.select(1, 5)), want, "the step after " + path);
  }
}

}  // namespace
}  // namespace format_fixtures_test
}  // namespace mixlab
