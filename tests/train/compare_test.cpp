// compare_run: the table does not depend on how many runs train at the same time.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "mixlab/core/error.h"
#include "mixlab/train/compare_report.h"

namespace mixlab {
namespace {

CompareOptions tiny_options(int64_t jobs, const std::string& out) {
  CompareOptions o;
  o.tasks = {"copy", "multihop"};
  o.mixers = {"attention", "local:4", "resolvent:pow2"};
  o.overrides = {{"steps", 6},   {"d_model", 16}, {"heads", 2},        {"layers", 1},    {"batch", 4},
                 {"length", 12}, {"pairs", 3},    {"eval_batches", 1}, {"eval_batch", 8}};
  o.out_dir = out;
  o.progress = false;
  o.jobs = jobs;
  return o;
}

TEST(TrainCompare, ParallelJobsGiveTheSameTable) {
  const int threads_before = at::get_num_threads();
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_compare_test";
  const CompareReport one = compare_run(tiny_options(1, (dir / "one").string()));
  const CompareReport two = compare_run(tiny_options(2, (dir / "two").string()));
  EXPECT_EQ(one.jobs, 1);
  EXPECT_EQ(two.jobs, 2);
  EXPECT_EQ(at::get_num_threads(), threads_before) << "the caller's intra-op thread count must not change";
  ASSERT_EQ(one.rows.size(), 3u);
  ASSERT_EQ(two.rows.size(), 3u);
  for (size_t r = 0; r < one.rows.size(); ++r) {
    SCOPED_TRACE(one.rows[r].mixer);
    ASSERT_TRUE(one.rows[r].ran) << one.rows[r].note;
    ASSERT_TRUE(two.rows[r].ran) << two.rows[r].note;
    EXPECT_EQ(one.rows[r].mixer, two.rows[r].mixer);
    EXPECT_EQ(one.rows[r].token_acc, two.rows[r].token_acc);
    EXPECT_EQ(one.rows[r].answer_acc, two.rows[r].answer_acc);
    EXPECT_EQ(one.rows[r].eval_loss, two.rows[r].eval_loss);  // bit-equal: same init, same batches
    EXPECT_EQ(one.rows[r].parameters, two.rows[r].parameters);
  }
  std::filesystem::remove_all(dir);
}

// --seeds N: every cell is the mean of N runs with seeds seed .. seed+N-1, shown with min..max;
// the first seed's run is the single-seed run; 0 seeds is an error.
TEST(TrainCompare, SeedsReportMeanAndRange) {
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_compare_seeds_test";
  CompareOptions o = tiny_options(2, (dir / "two").string());
  o.tasks = {"multihop"};
  o.mixers = {"attention"};
  const CompareReport single = compare_run(o);
  o.seeds = 2;
  const CompareReport two = compare_run(o);
  ASSERT_TRUE(two.rows.at(0).ran) << two.rows.at(0).note;
  EXPECT_EQ(two.seeds, 2);
  const auto& accs = two.rows[0].token_acc_seeds.at("multihop");
  ASSERT_EQ(accs.size(), 2u);
  EXPECT_EQ(accs[0], single.rows[0].token_acc.at("multihop"));
  EXPECT_DOUBLE_EQ(two.rows[0].token_acc.at("multihop"), (accs[0] + accs[1]) / 2);
  EXPECT_EQ(two.rows[0].chain_acc_seeds.at("multihop").size(), 2u);
  EXPECT_FALSE(two.rows[0].hop_acc.at("multihop").empty());
  const std::string text = compare_table_text(two);
  EXPECT_NE(
      text.find(fmt::format("{:.1f}..{:.1f}", 100 * std::min(accs[0], accs[1]), 100 * std::max(accs[0], accs[1]))),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("over 2 seeds"), std::string::npos);
  compare_write(two, (dir / "two").string());
  EXPECT_TRUE(std::filesystem::exists(dir / "two" / "runs" / "attention_multihop_seed1.jsonl"));
  o.seeds = 0;
  try {
    compare_run(o);
    ADD_FAILURE() << "seeds = 0 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--seeds must be >= 1"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mixlab
