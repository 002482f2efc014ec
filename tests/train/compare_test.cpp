// compare_run: the table does not depend on how many runs train at the same time.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mixlab/core/error.h"
#include "mixlab/train/compare_report.h"
#include "mixlab/train/run_metrics.h"

namespace mixlab {
namespace compare_test {
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
    // Each task's model count (table1's copy is wider than its other tasks).
    EXPECT_EQ(one.rows[r].parameters_by_task, two.rows[r].parameters_by_task);
    ASSERT_EQ(one.rows[r].parameters_by_task.size(), 2u);
    EXPECT_GT(one.rows[r].parameters_by_task.at("copy"), 0);
    EXPECT_EQ(one.rows[r].parameters_by_task.at("multihop"), one.rows[r].parameters);  // the last task's
  }
  std::filesystem::remove_all(dir);
}

// Every family gets analysis figures: a pattern's, the pattern its graph equals (toeplitz: causal,
// an affine member: order:1), or counts from its definition (brl, tpsm), with the basis printed.
TEST(TrainCompare, EveryFamilyHasAnalysisFigures) {
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_compare_families";
  CompareOptions o = tiny_options(1, dir.string());
  o.tasks = {"copy"};
  o.mixers = {"toeplitz", "gla", "brl:w=4:m=2:block=4", "tpsm:c=2", "local:4"};
  o.overrides["steps"] = 1;
  const CompareReport rep = compare_run(o);
  ASSERT_EQ(rep.rows.size(), 5u);
  const int64_t T = rep.rows[0].analysis_T;  // copy with length 12: T = 25
  for (const auto& r : rep.rows) {
    SCOPED_TRACE(r.mixer);
    ASSERT_TRUE(r.ran) << r.note;
    EXPECT_GE(r.cost_max, 1);
    EXPECT_GE(r.cache_max, 1);
    EXPECT_NE(r.shortest, "—");
    EXPECT_NE(r.congestion, "—");
    EXPECT_EQ(r.analysis_basis.empty(), r.mixer == "local:4");  // a pattern mixer needs no basis
  }
  EXPECT_EQ(rep.rows[0].cost_max, T - 1);  // toeplitz = causal: the last row reads every earlier one
  EXPECT_EQ(rep.rows[0].shortest, "1");
  EXPECT_EQ(rep.rows[1].cost_max, 1);  // gla = order:1
  EXPECT_EQ(rep.rows[1].shortest, std::to_string(T - 1));
  EXPECT_EQ(rep.rows[2].shortest, "∞");  // brl: one layer sees the window and the previous block
  EXPECT_EQ(rep.rows[3].structure, "Transformer-PSM (c = 2)");
  const std::string text = compare_table_text(rep);
  EXPECT_NE(text.find("tpsm:c=2: counted from Alg. 3/4"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

// Tasks trained at different widths (table1's copy at d_model 128) are named under the table;
// one width for every task prints nothing.
TEST(TrainCompare, TableNamesTheWidthOfEachTaskWhenTheyDiffer) {
  CompareReport rep;
  rep.preset = "table1";
  rep.tasks = {"copy", "recall", "multihop"};
  rep.d_model_by_task = {{"copy", 128}, {"recall", 64}, {"multihop", 64}};
  EXPECT_NE(compare_table_text(rep).find("Model width by task: recall, multihop d_model 64; copy d_model 128."),
            std::string::npos)
      << compare_table_text(rep);
  rep.d_model_by_task["copy"] = 64;
  EXPECT_EQ(compare_table_text(rep).find("Model width"), std::string::npos);
}

// A run that trained its whole plan on a plateau (no evaluation more than 5 points above the
// median of its evaluations nor, after the first, 5 below it, under 50 % at the end) is named
// under the table with its steps (and how many seeds, when not all), also when it rose a little
// right away (the main job's ssm); a run that left the plateau, one still climbing, one that
// climbed and then flattened (brl:hist=32 on MAD's fuzzy recall), one stopped early by stop_at,
// one high from its first evaluation, and lm, are not.
TEST(TrainCompare, TableNamesRunsThatStayedOnAPlateau) {
  CompareReport rep;
  rep.preset = "default";
  rep.tasks = {"recall", "lm"};
  auto row = [&](const std::string& mixer, int64_t planned, std::vector<int64_t> trained,
                 std::vector<std::vector<double>> curves) {
    CompareRow r;
    r.mixer = mixer;
    r.ran = true;
    r.steps_planned["recall"] = planned;
    r.steps_trained["recall"] = trained;
    for (auto& v : curves) {
      MetricCurve c;
      for (size_t i = 0; i < v.size(); ++i) c.step.push_back(static_cast<int64_t>(i + 1) * 250);
      c.value = v;
      r.eval_curves["recall"].push_back(c);
      r.token_acc_seeds["recall"].push_back(v.back());
    }
    r.eval_curves["lm"] = {MetricCurve{{250, 500}, {30.0, 30.0}}};
    r.ppl_seeds["lm"] = {30.0};
    r.bpb_seeds["lm"] = {2.0};
    rep.rows.push_back(r);
  };
  row("flat", 5000, {5000}, {{0.12, 0.13, 0.125, 0.128}});
  row("flat_one_seed", 5000, {5000, 5000}, {{0.12, 0.13, 0.12}, {0.12, 0.4, 0.9}});
  row("left", 5000, {5000}, {{0.12, 0.13, 0.5, 0.9}});
  row("stopped", 5000, {250}, {{0.12}});
  row("stopped_flat", 5000, {750}, {{0.12, 0.12, 0.13}});
  row("high_from_the_start", 500, {500}, {{0.99, 1.0}});
  row("rose_then_flat", 600, {600}, {{0.072, 0.138}});
  row("climbing", 5000, {5000}, {{0.1, 0.2, 0.3, 0.45}});
  row("climbed_then_flattened", 16000, {16000}, {{0.241, 0.285, 0.337, 0.404, 0.431, 0.43, 0.457, 0.48, 0.466}});
  const std::string text = compare_table_text(rep);
  const auto note = text.find("On a plateau for the whole plan");
  ASSERT_NE(note, std::string::npos) << text;
  const std::string tail = text.substr(note);
  EXPECT_NE(
      tail.find("  recall: flat (5000 steps), flat_one_seed (5000 steps; 1 of 2 seeds), rose_then_flat (600 steps)\n"),
      std::string::npos)
      << tail;
  for (const char* absent : {"left", "stopped", "high_from_the_start", "climb", "lm:"})
    EXPECT_EQ(tail.find(absent), std::string::npos) << absent << " must not be named:\n" << tail;
  rep.rows.erase(rep.rows.begin(), rep.rows.begin() + 2);
  rep.rows.erase(rep.rows.end() - 3);  // rose_then_flat
  EXPECT_EQ(compare_table_text(rep).find("On a plateau"), std::string::npos) << "no flat run, no note";
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

// --lr A,B: every run at each rate; the cells report the rate with the best mean validation
// accuracy over seeds, on the test split; the table, CSV and JSON name the rate, every rate tried
// is in the JSON with its validation and test figures.
TEST(TrainCompare, LearningRateSweepChoosesOnValidationAndReportsTest) {
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_compare_lr_test";
  std::filesystem::remove_all(dir);
  CompareOptions o = tiny_options(2, dir.string());
  o.tasks = {"copy"};
  o.mixers = {"attention"};
  o.overrides["steps"] = 40;
  o.overrides["log_every"] = 10;
  o.overrides["eval_every"] = 10;
  o.lrs = {1e-9, 1e-2};  // one rate learns nothing in 40 steps, the other learns something
  const CompareReport rep = compare_run(o);
  ASSERT_TRUE(rep.rows.at(0).ran) << rep.rows.at(0).note;
  const CompareRow& row = rep.rows[0];
  ASSERT_EQ(row.lr_trials.at("copy").size(), 2u);
  const LrTrial* best = nullptr;
  for (const auto& t : row.lr_trials.at("copy"))
    if (!best || t.valid_token_acc > best->valid_token_acc) best = &t;
  EXPECT_EQ(row.lr.at("copy"), best->lr);
  EXPECT_EQ(row.lr.at("copy"), 1e-2) << "the rate that trains must win on validation";
  EXPECT_EQ(row.token_acc.at("copy"), best->test_token_acc) << "the cell is the chosen rate's test accuracy";
  EXPECT_NE(best->valid_token_acc, best->test_token_acc) << "validation and test are different rows";
  // Curves of the reported run: an evaluation every 10 steps and at the end, the loss at every log line.
  ASSERT_EQ(row.eval_curves.at("copy").size(), 1u);
  EXPECT_EQ(row.eval_curves.at("copy")[0].step, (std::vector<int64_t>{10, 20, 30, 40}));
  EXPECT_EQ(row.loss_curves.at("copy")[0].step.size(), 4u);
  EXPECT_EQ(row.eval_curves.at("copy")[0].value.back(), row.token_acc.at("copy"));
  const std::string text = compare_table_text(rep);
  EXPECT_NE(text.find("copy lr"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen per mixer and task from 1e-09, 0.01"), std::string::npos) << text;
  EXPECT_NE(text.find("curves_copy.png"), std::string::npos) << text;
  compare_write(rep, dir.string());
  EXPECT_TRUE(std::filesystem::exists(dir / "runs" / "attention_copy_lr1e-09.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(dir / "runs" / "attention_copy_lr0.01.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(dir / "curves_copy.png"));
  std::ifstream json_in(dir / "compare.json");
  const auto doc = nlohmann::json::parse(json_in);
  EXPECT_EQ(doc["lrs"], nlohmann::json({1e-9, 1e-2}));
  EXPECT_EQ(doc["rows"][0]["lr"]["copy"], 1e-2);
  EXPECT_EQ(doc["rows"][0]["lr_sweep"]["copy"].size(), 2u);
  std::ifstream csv_in(dir / "compare.csv");
  std::string header;
  std::getline(csv_in, header);
  EXPECT_NE(header.find(",copy_lr"), std::string::npos) << header;
  std::filesystem::remove_all(dir);
}

TEST(TrainCompare, LearningRateSweepRefusesBadInput) {
  CompareOptions o = tiny_options(1, (std::filesystem::temp_directory_path() / "mixlab_compare_lr_bad").string());
  auto expect_error = [&](const CompareOptions& opt, const std::string& part) {
    try {
      compare_run(opt);
      ADD_FAILURE() << "expected an error containing: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  o.lrs = {1e-3, -1.0};
  expect_error(o, "--lr expects learning rates > 0, got -1");
  o.lrs = {1e-3, 3e-3};
  o.tasks = {"file"};
  expect_error(o, "task file has one held-out set");
}

// The sparkline: one block per value, spanning lo..hi, at most `width` blocks.
TEST(TrainCompare, SparklineSpansItsRange) {
  EXPECT_EQ(sparkline({0.0, 0.5, 1.0}, 0, 1), "▁▅█");
  EXPECT_EQ(sparkline({}, 0, 1), "");
  EXPECT_EQ(sparkline({2.0, -1.0}, 0, 1), "█▁") << "values outside [lo, hi] are clamped";
  EXPECT_EQ(sparkline(std::vector<double>(100, 1.0), 0, 1, 10), "██████████") << "100 values in 10 buckets";
}

}  // namespace
}  // namespace compare_test
}  // namespace mixlab

namespace mixlab {
namespace compare_test {
namespace {

// run_metrics.h against the file it reads: complete lines kept in order, a torn line skipped and
// reported by number, a curve holds only the lines with the key and an integer step.
TEST(RunMetrics, ReadsCompleteLinesAndSkipsTornOnes) {
  const auto path = std::filesystem::temp_directory_path() / "mixlab_run_metrics_test.jsonl";
  {
    std::ofstream out(path);
    out << "{\"step\":10,\"loss\":2.0}\n\n{\"step\":10,\"eval_token_acc\":0.5}\n{\"step\":20,\"loss\":1.5}\n{\"step\":"
           "3";
  }
  std::vector<int64_t> skipped;
  const auto lines = read_metrics_lines(path.string(), [&](int64_t n) { skipped.push_back(n); });
  EXPECT_EQ(lines.size(), 3u);
  EXPECT_EQ(skipped, (std::vector<int64_t>{5}));
  const MetricCurve loss = metric_curve(lines, "loss");
  EXPECT_EQ(loss.step, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(loss.value, (std::vector<double>{2.0, 1.5}));
  EXPECT_EQ(metric_curve(lines, "eval_token_acc").value, (std::vector<double>{0.5}));
  EXPECT_THROW(read_metrics_lines((path.string() + ".missing")), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace compare_test
}  // namespace mixlab
