// compare --resume (mixlab/train/compare_run_record.h): an interrupted compare keeps the runs it
// finished and resumes the ones it left with a checkpoint, and its table equals the table of a
// compare that was never interrupted; records of other settings or damaged ones are errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/model/init_lock.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/compare_report.h"
#include "mixlab/train/compare_run_record.h"
#include "mixlab/train/run_metrics.h"

namespace mixlab {
namespace compare_resume_test {
namespace {

namespace fs = std::filesystem;

CompareOptions resume_options(const fs::path& dir) {
  CompareOptions o;
  o.tasks = {"copy", "multihop"};
  o.mixers = {"attention", "local:4"};
  o.overrides = {{"steps", 12},     {"d_model", 16},   {"heads", 2},     {"layers", 1},
                 {"batch", 4},      {"length", 12},    {"pairs", 3},     {"eval_batches", 1},
                 {"eval_batch", 8}, {"eval_every", 4}, {"log_every", 4}, {"checkpoint_every", 4}};
  o.out_dir = dir.string();
  o.progress = false;
  o.jobs = 2;
  o.sweep_lengths = {{"copy", {8, 12}}};  // read from each run's model: a kept run's must be its weights
  return o;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The config compare gives one run of `o` (its row-group choice, compare_run.cpp; resume_options
// sets checkpoint_every itself).
TrainConfig run_config(const CompareOptions& o, const std::string& task, const std::string& mixer) {
  TrainConfig c = compare_config(o.preset, task, mixer, o.overrides);
  c.row_groups = 1;
  return c;
}

// Trains one run of `o` to step `until`, as a compare worker cut there leaves it.
void train_cut_run(const CompareOptions& o, const std::string& task, const std::string& mixer, int64_t until,
                   const fs::path& checkpoint, const std::string& metrics = "") {
  std::unique_ptr<Trainer> t;
  {
    std::lock_guard<std::mutex> lock(model_init_mutex());
    t = std::make_unique<Trainer>(run_config(o, task, mixer));
  }
  TrainOptions to;
  to.progress = false;
  to.until = until;
  to.checkpoint_path = checkpoint.string();
  to.metrics_path = metrics;
  t->run(to);
}

void expect_same_cells(const CompareReport& a, const CompareReport& b) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t r = 0; r < a.rows.size(); ++r) {
    SCOPED_TRACE(a.rows[r].mixer);
    ASSERT_TRUE(a.rows[r].ran) << a.rows[r].note;
    ASSERT_TRUE(b.rows[r].ran) << b.rows[r].note;
    EXPECT_EQ(a.rows[r].token_acc, b.rows[r].token_acc);  // bit for bit
    EXPECT_EQ(a.rows[r].answer_acc, b.rows[r].answer_acc);
    EXPECT_EQ(a.rows[r].eval_loss, b.rows[r].eval_loss);
    EXPECT_EQ(a.rows[r].chain_acc, b.rows[r].chain_acc);
    EXPECT_EQ(a.rows[r].hop_acc, b.rows[r].hop_acc);
    EXPECT_EQ(a.rows[r].steps_trained, b.rows[r].steps_trained);
    EXPECT_EQ(a.rows[r].parameters_by_task, b.rows[r].parameters_by_task);
    ASSERT_EQ(a.rows[r].sweep.at("copy").size(), 1u);
    ASSERT_EQ(b.rows[r].sweep.at("copy").size(), 1u);
    for (size_t k = 0; k < a.rows[r].sweep.at("copy")[0].size(); ++k) {
      EXPECT_EQ(a.rows[r].sweep.at("copy")[0][k].token_error, b.rows[r].sweep.at("copy")[0][k].token_error);
      EXPECT_EQ(a.rows[r].sweep.at("copy")[0][k].answer_error, b.rows[r].sweep.at("copy")[0][k].answer_error);
    }
    for (const auto& [task, curves] : a.rows[r].eval_curves) {
      ASSERT_EQ(curves.size(), b.rows[r].eval_curves.at(task).size());
      EXPECT_EQ(curves[0].step, b.rows[r].eval_curves.at(task)[0].step) << task;
      EXPECT_EQ(curves[0].value, b.rows[r].eval_curves.at(task)[0].value) << task;
      EXPECT_EQ(a.rows[r].loss_curves.at(task)[0].value, b.rows[r].loss_curves.at(task)[0].value) << task;
    }
  }
}

// Four runs, left as an interruption leaves them: one finished (kept), one killed after its last
// checkpoint and before its record (resumed at its last step), one killed mid-run (resumed from
// step 8 of 12), one never started (trained). The resumed compare's cells and curves equal those
// of the compare that was never interrupted, and the finished run is not trained again.
TEST(CompareResume, KeepsFinishedRunsResumesTheRestAndGivesTheSameTable) {
  const fs::path dir = fs::temp_directory_path() / "mixlab_compare_resume";
  fs::remove_all(dir);
  CompareOptions o = resume_options(dir / "whole");
  const CompareReport whole = compare_run(o);
  EXPECT_EQ(whole.runs, 4);
  EXPECT_EQ(whole.runs_kept, 0);
  for (const char* base : {"attention_copy", "local_4_copy", "attention_multihop", "local_4_multihop"})
    for (const char* suffix : {".jsonl", ".pt", ".result.json"})
      EXPECT_TRUE(fs::exists(dir / "whole" / "runs" / (std::string(base) + suffix))) << base << suffix;

  o.out_dir = (dir / "cut").string();
  fs::copy(dir / "whole", dir / "cut", fs::copy_options::recursive);
  const fs::path runs = dir / "cut" / "runs";
  // Killed between the final checkpoint and the record.
  fs::remove(runs / "attention_copy.result.json");
  // Killed mid-run: train local:4 on copy to step 8 under compare's config, as its worker would.
  fs::remove(runs / "local_4_copy.result.json");
  train_cut_run(o, "copy", "local:4", 8, runs / "local_4_copy.pt", (runs / "local_4_copy.jsonl").string());
  EXPECT_EQ(checkpoint_read((runs / "local_4_copy.pt").string()).step, 8);
  // Never started.
  for (const char* suffix : {".jsonl", ".pt", ".result.json"})
    fs::remove(runs / (std::string("local_4_multihop") + suffix));
  const std::string kept_metrics = read_text(runs / "attention_multihop.jsonl");
  const std::string partial = read_text(runs / "local_4_copy.jsonl");
  const std::string partial_first = partial.substr(0, partial.find('\n'));

  o.resume = true;
  {
    // --plan: each run's state and steps from its files, nothing trained or changed.
    CompareOptions plan = o;
    plan.plan_only = true;
    plan.before_first_write = [](const std::string&) { ADD_FAILURE() << "a plan takes no lock and writes nothing"; };
    const CompareReport p = compare_run(plan);
    ASSERT_EQ(p.plan.size(), 4u);
    EXPECT_TRUE(p.rows.empty());
    EXPECT_EQ(p.runs, 4);
    EXPECT_EQ(p.runs_kept, 1);
    EXPECT_EQ(p.runs_resumed, 2);
    using State = ComparePlannedRun::State;
    const std::vector<std::tuple<std::string, std::string, State, int64_t>> want = {
        {"attention", "copy", State::kResume, 12},
        {"attention", "multihop", State::kKept, 12},
        {"local:4", "copy", State::kResume, 8},
        {"local:4", "multihop", State::kTrain, 0}};
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(p.plan[i].mixer, std::get<0>(want[i]));
      EXPECT_EQ(p.plan[i].task, std::get<1>(want[i]));
      EXPECT_EQ(p.plan[i].state, std::get<2>(want[i]));
      EXPECT_EQ(p.plan[i].step, std::get<3>(want[i]));
      EXPECT_EQ(p.plan[i].steps, 12);
      EXPECT_FALSE(p.plan[i].replaces);
    }
    const std::string text = compare_plan_text(p, o.out_dir, true);
    EXPECT_NE(text.find("1 kept, 2 resumed from a checkpoint, 1 trained from the start; 16 of 48 planned steps left"),
              std::string::npos)
        << text;
    // Time left from each mixer's measured rate: none for a run at its last step or kept; local:4's
    // runs from the metrics of its cut copy run, the one never started more than the one cut at 8.
    EXPECT_EQ(p.plan[0].seconds_left, 0);
    EXPECT_EQ(p.plan[1].seconds_left, 0);
    EXPECT_GT(p.plan[2].seconds_left, 0);
    EXPECT_GT(p.plan[3].seconds_left, p.plan[2].seconds_left);
    EXPECT_NE(text.find("time left = an estimate"), std::string::npos) << text;
    // Nothing measured: no estimate.
    CompareOptions empty = plan;
    empty.out_dir = (dir / "empty").string();
    const CompareReport none = compare_run(empty);
    for (const auto& run : none.plan) EXPECT_EQ(run.seconds_left, -1) << run.base;
    EXPECT_EQ(compare_plan_text(none, empty.out_dir, true).find("time left ="), std::string::npos);
    EXPECT_FALSE(fs::exists(dir / "empty")) << "a plan creates nothing";
    // Without --resume every run trains, and the plan says which names hold an earlier compare's files.
    plan.resume = false;
    const CompareReport fresh = compare_run(plan);
    ASSERT_EQ(fresh.plan.size(), 4u);
    for (const auto& run : fresh.plan) EXPECT_EQ(run.state, State::kTrain) << run.base;
    EXPECT_TRUE(fresh.plan[0].replaces && fresh.plan[1].replaces && fresh.plan[2].replaces);
    EXPECT_FALSE(fresh.plan[3].replaces);
    EXPECT_NE(compare_plan_text(fresh, o.out_dir, false).find("files under 3 of these names go first"),
              std::string::npos);
    EXPECT_TRUE(fs::exists(runs / "attention_multihop.result.json")) << "a plan removes nothing";
    EXPECT_EQ(read_text(runs / "local_4_copy.jsonl"), partial);
  }
  const CompareReport resumed = compare_run(o);
  EXPECT_EQ(resumed.runs, 4);
  EXPECT_EQ(resumed.runs_kept, 1);
  EXPECT_EQ(resumed.runs_resumed, 2);
  EXPECT_EQ(read_text(runs / "attention_multihop.jsonl"), kept_metrics) << "a kept run is not trained again";
  // The run cut at step 8 went on from there: its metrics keep the cut run's lines (their seconds
  // are that run's) and go on to step 12.
  const std::string went_on = read_text(runs / "local_4_copy.jsonl");
  EXPECT_EQ(went_on.substr(0, went_on.find('\n')), partial_first);
  EXPECT_NE(went_on.find("\"step\":12"), std::string::npos) << went_on;
  expect_same_cells(whole, resumed);
  // A run resumed at its last step trained nothing in this process (a rate of 0 would have
  // gone into the table's mean); its seconds and rate are those its metrics carry.
  {
    const CompareRunRecord r =
        compare_run_record_read((runs / "attention_copy.result.json").string(), run_config(o, "copy", "attention"));
    double tokens = 0, seconds = 0;
    for (const auto& line : read_metrics_lines((runs / "attention_copy.jsonl").string()))
      if (line.contains("tokens")) tokens = line.at("tokens").get<double>(), seconds = line.at("seconds").get<double>();
    EXPECT_GT(r.result.tokens_per_s, 0);
    EXPECT_EQ(r.result.seconds, seconds);
    EXPECT_EQ(r.result.tokens_per_s, tokens / seconds);
  }
  const std::string text = compare_table_text(resumed);
  EXPECT_NE(text.find("1 of 4 runs kept from an earlier compare, 2 resumed from a checkpoint"), std::string::npos)
      << text;

  // A second --resume keeps all four.
  const CompareReport again = compare_run(o);
  EXPECT_EQ(again.runs_kept, 4);
  expect_same_cells(whole, again);
  fs::remove_all(dir);
}

// A record or checkpoint of other settings, a record of other kernels, a damaged record, a
// checkpoint whose step disagrees with its record and a record without its checkpoint are errors
// naming the file and what differs; nothing is trained over them.
TEST(CompareResume, RefusesRecordsOfOtherSettingsOrKernelsAndDamagedOnes) {
  const fs::path dir = fs::temp_directory_path() / "mixlab_compare_resume_bad";
  fs::remove_all(dir);
  CompareOptions o = resume_options(dir);
  o.tasks = {"copy"};
  o.mixers = {"attention"};
  compare_run(o);
  const fs::path record = dir / "runs" / "attention_copy.result.json";
  const fs::path checkpoint = dir / "runs" / "attention_copy.pt";
  const std::string good = read_text(record);
  const std::string good_checkpoint = read_text(checkpoint);
  auto write = [](const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  o.resume = true;
  auto expect_error = [&](const CompareOptions& opt, const std::string& part, const fs::path& file) {
    try {
      const CompareReport rep = compare_run(opt);
      ADD_FAILURE() << "expected an error containing: " << part << "; row note: " << rep.rows.at(0).note;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  CompareOptions other = o;
  other.overrides["lr"] = 0.0123;
  expect_error(other, "was trained with other settings ('lr': ", record);
  EXPECT_EQ(read_text(record), good) << "a refused record is left as it was";

  // The same record with other kernels, its checksum made right.
  {
    auto doc = nlohmann::json::parse(good);
    doc["record"]["blas"] = "another BLAS";
    doc["checksum"] = fmt::format("{:016x}", checksum64(doc["record"].dump()));
    write(record, doc.dump(1));
  }
  expect_error(o, "was computed with other kernels (native ", record);

  std::string damaged = good;
  damaged[damaged.find("\"token_acc\": ") + 13] ^= 1;  // a digit of an accuracy: 0 <-> 1, 2 <-> 3, ...
  write(record, damaged);
  expect_error(o, "does not match its record", record);
  write(record, good.substr(0, good.size() / 2));
  expect_error(o, "not JSON", record);
  write(record, std::string(100, '[') + std::string(100, ']'));
  expect_error(o, "nested 100 deep, a record is at most 16", record);

  // No record, and a checkpoint of other settings (8 steps where the run has 12), e.g. a compare
  // killed after a change of --steps: refused before any run, as a record would be.
  fs::remove(record);
  CompareOptions shorter = o;
  shorter.resume = false;
  shorter.overrides["steps"] = 8;
  shorter.out_dir = (dir / "eight").string();
  compare_run(shorter);
  fs::copy_file(dir / "eight" / "runs" / "attention_copy.pt", checkpoint, fs::copy_options::overwrite_existing);
  expect_error(o, "was trained with other settings ('steps': 8 there, 12 now)", checkpoint);

  // The record whole again, with a checkpoint of the same settings at another step (8 of 12, as a
  // run cut at step 8 leaves it): refused before any run, since neither file can be trusted.
  write(record, good);
  train_cut_run(o, "copy", "attention", 8, checkpoint);
  expect_error(o, "is at step 8, its record", record);
  // A record without its checkpoint (the run's model): refused, naming both.
  fs::remove(checkpoint);
  expect_error(o, "has no checkpoint", checkpoint);

  // Without --resume every run starts over, and the files of an earlier compare go before the
  // first run.
  write(checkpoint, good_checkpoint);
  o.resume = false;
  o.mixers = {"attention", "attention"};
  try {
    compare_run(o);
    ADD_FAILURE() << "a mixer listed twice must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention on copy is listed twice"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// A compare run with one seed names its files without _seed<S>, one without a sweep without
// _lr<R>. --resume with more seeds, then with a sweep of rates, keeps those runs under their new
// names (the sweep's choice evaluating the validation split a run without a sweep did not) and
// trains only the new ones; the cells equal those of compares that trained everything.
TEST(CompareResume, AddingSeedsThenRatesKeepsTheRunsThatAreThere) {
  const fs::path dir = fs::temp_directory_path() / "mixlab_compare_resume_grow";
  fs::remove_all(dir);
  CompareOptions o = resume_options(dir / "grown");
  o.tasks = {"copy"};
  o.mixers = {"attention"};
  o.sweep_lengths.clear();
  const TrainConfig c = run_config(o, "copy", "attention");
  const fs::path runs = dir / "grown" / "runs";
  compare_run(o);
  ASSERT_TRUE(fs::exists(runs / "attention_copy.result.json"));

  auto same = [](const CompareReport& a, const CompareReport& b) {
    ASSERT_EQ(a.rows.size(), 1u);
    ASSERT_EQ(b.rows.size(), 1u);
    ASSERT_TRUE(a.rows[0].ran) << a.rows[0].note;
    ASSERT_TRUE(b.rows[0].ran) << b.rows[0].note;
    EXPECT_EQ(a.rows[0].token_acc_seeds, b.rows[0].token_acc_seeds);  // bit for bit
    EXPECT_EQ(a.rows[0].answer_acc, b.rows[0].answer_acc);
    EXPECT_EQ(a.rows[0].eval_loss, b.rows[0].eval_loss);
    EXPECT_EQ(a.rows[0].steps_trained, b.rows[0].steps_trained);
    EXPECT_EQ(a.rows[0].lr, b.rows[0].lr);
    ASSERT_EQ(a.rows[0].lr_trials.size(), b.rows[0].lr_trials.size());
    for (const auto& [task, trials] : a.rows[0].lr_trials) {
      ASSERT_EQ(trials.size(), b.rows[0].lr_trials.at(task).size());
      for (size_t i = 0; i < trials.size(); ++i) {
        EXPECT_EQ(trials[i].valid_token_acc, b.rows[0].lr_trials.at(task)[i].valid_token_acc) << i;
        EXPECT_EQ(trials[i].valid_loss, b.rows[0].lr_trials.at(task)[i].valid_loss) << i;
        EXPECT_EQ(trials[i].test_token_acc, b.rows[0].lr_trials.at(task)[i].test_token_acc) << i;
      }
    }
  };

  // Two seeds: seed 0's run is kept under its new name, seed 1's trained.
  o.seeds = 2;
  o.resume = true;
  {
    CompareOptions plan = o;
    plan.plan_only = true;
    const CompareReport p = compare_run(plan);
    ASSERT_EQ(p.plan.size(), 2u);
    EXPECT_EQ(p.plan[0].state, ComparePlannedRun::State::kKept);
    EXPECT_EQ(p.plan[0].adopted_from, (runs / "attention_copy").string());
    EXPECT_EQ(p.plan[1].state, ComparePlannedRun::State::kTrain);
    EXPECT_NE(compare_plan_text(p, o.out_dir, true).find("kept (attention_copy renamed)"), std::string::npos);
    EXPECT_TRUE(fs::exists(runs / "attention_copy.result.json")) << "a plan renames nothing";
  }
  const CompareReport two = compare_run(o);
  EXPECT_EQ(two.runs_kept, 1);
  const std::string seed0 = fmt::format("attention_copy_seed{}", c.seed);
  for (const char* suffix : {".jsonl", ".pt", ".result.json"}) {
    EXPECT_TRUE(fs::exists(runs / (seed0 + suffix))) << suffix;
    EXPECT_FALSE(fs::exists(runs / (std::string("attention_copy") + suffix))) << suffix;
  }
  CompareOptions fresh = o;
  fresh.resume = false;
  fresh.out_dir = (dir / "fresh2").string();
  same(two, compare_run(fresh));

  // A sweep over the preset's rate and another: the two runs there are kept, two trained.
  o.lrs = {c.lr, 2 * c.lr};
  const CompareReport swept = compare_run(o);
  EXPECT_EQ(swept.runs, 4);
  EXPECT_EQ(swept.runs_kept, 2);
  const fs::path swept_record = runs / fmt::format("{}_lr{}.result.json", seed0, c.lr);
  ASSERT_TRUE(fs::exists(swept_record));
  TrainConfig c0 = c;
  EXPECT_GT(compare_run_record_read(swept_record.string(), c0).valid.answer_tokens, 0)
      << "the kept run's record now holds its validation split";
  fresh.lrs = o.lrs;
  fresh.out_dir = (dir / "fresh_swept").string();
  same(swept, compare_run(fresh));
  const CompareReport again = compare_run(o);
  EXPECT_EQ(again.runs_kept, 4);
  same(swept, again);

  // Back to the preset's rate alone: the swept runs at that rate are kept under their old names.
  o.lrs.clear();
  const CompareReport unswept = compare_run(o);
  EXPECT_EQ(unswept.runs_kept, 2);
  EXPECT_TRUE(fs::exists(runs / (seed0 + ".result.json")));
  same(unswept, two);

  // Files of other settings under the old name are not taken, and the plan says why (seed 0's
  // files of 12 steps back under their one-seed name, planned at 16 steps).
  {
    CompareOptions longer = o;
    longer.out_dir = (dir / "longer").string();
    longer.overrides["steps"] = 16;
    longer.plan_only = true;
    fs::create_directories(dir / "longer" / "runs");
    for (const char* suffix : {".jsonl", ".pt", ".result.json"})
      fs::copy_file(runs / (seed0 + suffix), dir / "longer" / "runs" / (std::string("attention_copy") + suffix));
    const CompareReport refused = compare_run(longer);
    ASSERT_EQ(refused.plan.size(), 2u);
    EXPECT_EQ(refused.plan[0].state, ComparePlannedRun::State::kTrain);
    EXPECT_NE(refused.plan[0].not_taken.find("attention_copy.* not taken: "), std::string::npos)
        << refused.plan[0].not_taken;
    EXPECT_NE(refused.plan[0].not_taken.find("'steps': 12 there, 16 now"), std::string::npos)
        << refused.plan[0].not_taken;
    EXPECT_NE(compare_plan_text(refused, longer.out_dir, true).find("run 1: attention_copy.* not taken"),
              std::string::npos);
  }

  // A compare killed between moving a run's checkpoint and its record: the next --resume finishes
  // the move and keeps the run.
  fs::rename(runs / (seed0 + ".result.json"), runs / "attention_copy.result.json");
  {
    CompareOptions plan = o;
    plan.plan_only = true;
    const CompareReport p = compare_run(plan);
    EXPECT_EQ(p.plan[0].state, ComparePlannedRun::State::kKept);
    EXPECT_EQ(p.plan[0].adopted_from, (runs / "attention_copy").string());
  }
  const CompareReport finished = compare_run(o);
  EXPECT_EQ(finished.runs_kept, 2);
  EXPECT_EQ(finished.runs_resumed, 0);
  EXPECT_FALSE(fs::exists(runs / "attention_copy.result.json"));
  same(finished, two);
  fs::remove_all(dir);
}

TEST(CompareResume, RunBaseNamesEveryRunApart) {
  EXPECT_EQ(compare_run_base("resolvent:pow2+cache", "copy", 0, false, 1e-3, false), "resolvent_pow2_cache_copy");
  EXPECT_EQ(compare_run_base("ssm*3|attention", "recall", 7, true, 3e-3, true), "ssm_3_attention_recall_seed7_lr0.003");
  // Rates that {:g} would print alike get names apart.
  EXPECT_NE(compare_run_base("gla", "copy", 0, false, 1.234567e-3, true),
            compare_run_base("gla", "copy", 0, false, 1.234568e-3, true));
}

}  // namespace
}  // namespace compare_resume_test
}  // namespace mixlab
