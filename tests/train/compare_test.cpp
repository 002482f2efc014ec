// compare_run: the table does not depend on how many runs train at the same time.
#include "mixlab/train/compare.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
}  // namespace mixlab
