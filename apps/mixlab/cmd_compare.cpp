// `mixlab compare`: seed 000 Table 1 on this machine (mixlab/train/compare.h).
//
//   mixlab compare                                   # default preset, all tasks, all mixers
//   mixlab compare --tasks copy --mixers attention,local:8 --set steps=100
//   mixlab compare --preset table1                   # seed 000 Table 1's three columns on a CPU (~75 min)
//   mixlab compare --preset paper                    # seed 000 App. C.3 hyperparameters
//   mixlab compare --preset psm --tasks s5 --mixers tpsm:c=1,attention,local:8,mamba
//   mixlab compare --tasks copy --sweep copy=4-32/4  # error against length after training
//   mixlab compare --preset mad                      # MAD's tasks + selective copy + induction, every family
//   mixlab compare --preset mad --resume             # after an interruption: keeps the runs that finished
//   mixlab compare --preset mad --resume --plan      # what that would keep, resume and train; trains nothing
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

#include "commands.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/core/dir_lock.h"
#include "mixlab/core/error.h"
#include "mixlab/train/compare_report.h"

namespace mixlab::cli {
namespace {

struct CompareArgs {
  std::string tasks;  // empty: the preset's (compare_preset_tasks)
  std::string mixers = "all";
  std::string preset = "default";
  std::string out = "runs/compare";
  std::vector<std::string> sets;
  int64_t steps = 0;
  int64_t jobs = 0;  // 0: one run per intra-op thread (--threads)
  int64_t seeds = 1;
  std::vector<std::string> sweeps;  // TASK=LENGTHS
  int64_t sweep_rows = 256;
  std::string lrs;  // --lr 1e-3,3e-3
  bool quiet = false;
  bool resume = false;
  bool plan = false;
};

std::vector<std::string> split_list(const std::string& s, const char* what);

// "1e-3,3e-3" -> {0.001, 0.003}; every entry a number > 0, no repeats.
std::vector<double> parse_lrs(const std::string& s, const char* what) {
  std::vector<double> out;
  for (const auto& item : split_list(s, what)) {
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MIXLAB_CHECK(used == item.size() && std::isfinite(v) && v > 0,
                 "compare: {} expects learning rates > 0 separated by commas (e.g. 1e-3,3e-3), got '{}' in '{}'", what,
                 item, s);
    MIXLAB_CHECK(std::find(out.begin(), out.end(), v) == out.end(), "compare: {} lists {} twice in '{}'", what, item,
                 s);
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> split_list(const std::string& s, const char* what) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    MIXLAB_CHECK(!item.empty(), "compare: {} has an empty entry in '{}'", what, s);
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void run_compare(const CompareArgs& a) {
  CompareOptions o;
  o.tasks = a.tasks.empty() ? compare_preset_tasks(a.preset) : split_list(a.tasks, "--tasks");
  o.mixers = a.mixers == "all" ? compare_preset_mixers(a.preset) : split_list(a.mixers, "--mixers");
  o.preset = a.preset;
  o.out_dir = a.out;
  o.progress = !a.quiet;
  o.seeds = a.seeds;  // checked by compare_run (>= 1)
  // Small default-preset models train faster as parallel 1-thread runs; the paper preset's
  // models need GBs of activations each and use intra-op threads well, so one run at a time.
  o.jobs = a.jobs > 0 ? a.jobs : (a.preset == "paper" ? 1 : at::get_num_threads());
  for (const auto& kv : a.sets) {
    const auto eq = kv.find('=');
    MIXLAB_CHECK(eq != std::string::npos && eq > 0, "compare: --set expects KEY=VALUE, got '{}'", kv);
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "lr" && value.find(',') != std::string::npos) {  // a list: the same as --lr
      o.lrs = parse_lrs(value, "--set lr");
      continue;
    }
    try {
      o.overrides[key] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::parse_error&) {
      o.overrides[key] = value;
    }
  }
  if (a.steps > 0) o.overrides["steps"] = a.steps;
  if (!a.lrs.empty()) {
    MIXLAB_CHECK(o.lrs.empty(), "compare: give the learning rates once, with --lr or with --set lr=A,B, not both");
    o.lrs = parse_lrs(a.lrs, "--lr");
  }
  // One rate is no sweep: it overrides the preset's like --set lr=X.
  if (o.lrs.size() == 1) o.overrides["lr"] = o.lrs.front(), o.lrs.clear();
  o.sweep_lengths = compare_preset_sweeps(a.preset, o.tasks, o.overrides);
  for (const auto& item : a.sweeps) {
    const auto eq = item.find('=');
    MIXLAB_CHECK(eq != std::string::npos && eq > 0,
                 "compare: --sweep expects TASK=LENGTHS (e.g. s5=1-180/10), got '{}'", item);
    const std::string task = item.substr(0, eq);
    o.sweep_lengths[task] = length_list_parse(item.substr(eq + 1), fmt::format("compare: --sweep {}", task));
  }
  o.sweep_rows = a.sweep_rows;
  o.resume = a.resume;
  o.plan_only = a.plan;
  // The output directory is this command's while it runs: a second compare into it (which would
  // mix two runs' checkpoints and records) gets "in use by pid N". Taken once everything is
  // validated, so a rejected compare creates nothing.
  std::optional<DirLock> lock;
  o.before_first_write = [&](const std::string& out) {
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    MIXLAB_CHECK_IO(!ec, "compare: --out '{}': cannot create the directory: {}", out, ec.message());
    lock.emplace(out, "compare directory");
    for (const std::string& dir : {out, out + "/runs"}) {
      // A compare killed inside a write left its temporary file; holding the lock, none is live.
      const int64_t stale = std::filesystem::is_directory(dir) ? remove_stale_temp_files(dir) : 0;
      if (stale > 0 && !a.quiet)
        std::cerr << fmt::format("compare: removed {} stale temporary file(s) in {}\n", stale, dir);
    }
  };
  const CompareReport rep = compare_run(o);
  if (a.plan) {
    std::cout << compare_plan_text(rep, o.out_dir, a.resume);
    return;
  }
  if (a.resume)
    std::cout << fmt::format(
        "compare --resume: of {} runs, {} kept from {}/runs, {} resumed from a checkpoint, {} trained\n", rep.runs,
        rep.runs_kept, o.out_dir, rep.runs_resumed, rep.runs - rep.runs_kept - rep.runs_resumed);
  std::cout << compare_table_text(rep);
  compare_write(rep, o.out_dir);
  const bool lm = std::find(o.tasks.begin(), o.tasks.end(), "lm") != o.tasks.end();
  const bool bars = std::any_of(o.tasks.begin(), o.tasks.end(), [](const std::string& t) { return t != "lm"; });
  std::string sweeps;
  for (const auto& [task, lengths] : o.sweep_lengths) sweeps += fmt::format(", {}/by_length_{}.png", o.out_dir, task);
  std::string curves;
  for (const auto& t : o.tasks)
    if (std::filesystem::exists(o.out_dir + "/curves_" + t + ".png"))
      curves += fmt::format(", {}/curves_{}.png", o.out_dir, t);
  std::cout << fmt::format("wrote {0}/compare.csv, {0}/compare.json{1}{2}{3}{4}\n", o.out_dir,
                           bars ? fmt::format(", {}/compare.png", o.out_dir) : std::string(),
                           lm ? fmt::format(", {}/compare_lm.png", o.out_dir) : std::string(),
                           sweeps.empty() ? std::string() : fmt::format(", {}/by_length.csv{}", o.out_dir, sweeps),
                           curves);
  if (a.preset == "default" && a.tasks.empty())
    std::cout << "multihop is not in the main job: its plateau breaks after 8000-10000 steps here, beyond these "
                 "minutes; `mixlab compare --preset table1` runs it (docs/RESULTS.md)\n";
}

}  // namespace

void cmd_compare_register(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Train every mixer on every task with identical settings and print seed 000's Table 1");
  sub->add_option("--tasks", args->tasks,
                  "Comma-separated tasks (default: the preset's; default copy,recall, table1 and paper "
                  "copy,recall,multihop, psm s5,recall, mad its seven tasks)");
  sub->add_option("--mixers", args->mixers,
                  "Comma-separated mixer specs, or 'all' (Table 1's nine; preset mad: one per registered family)");
  sub->add_option(
         "--preset", args->preset,
         "default (CPU: copy and recall, recall runs stop at 95 %), table1 (seed 000 Table 1's copy, recall and "
         "multihop results on a CPU, about 75 min on 2 cores), "
         "paper (seed 000 App. C.3), psm (seed 004's s5 and recall, with length sweeps) or mad (the MAD suite, "
         "selective copying and induction heads, every mixer family)")
      ->check(CLI::IsMember(compare_presets()));
  sub->add_option("--out", args->out, "Output directory for CSV, JSON, PNG (default runs/compare)");
  sub->add_option("--steps", args->steps, "Training steps per run (overrides the preset)")->check(CLI::PositiveNumber);
  sub->add_option("--set", args->sets, "Override a config key for every run: --set d_model=128 (repeatable)");
  sub->add_option("--jobs", args->jobs,
                  "Runs trained at the same time, one intra-op thread each (default: --threads; 1 for --preset paper); "
                  "results do not depend on it")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seeds", args->seeds,
                  "Runs per mixer and task with seeds seed, seed+1, ...; cells show mean (min..max) (default 1)");
  sub->add_option("--sweep", args->sweeps,
                  "After training, evaluate a task at these lengths: TASK=LENGTHS, e.g. s5=1-18,24-180/12 (repeatable; "
                  "preset psm has its own)");
  sub->add_option("--sweep-rows", args->sweep_rows, "Held-out rows per sweep length (default 256)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--lr", args->lrs,
                  "Learning-rate sweep, e.g. 1e-3,3e-3,1e-2: every run at each rate; per mixer and task the best on a "
                  "validation split is reported on the test split, with the rate in the table (also --set lr=A,B)");
  sub->add_flag("--quiet", args->quiet, "No progress lines");
  sub->add_flag("--resume", args->resume,
                "Keep the runs an earlier compare into --out finished (their records and checkpoints in OUT/runs) and "
                "resume the ones it left with a checkpoint; the table equals an uninterrupted compare's");
  sub->add_flag("--plan", args->plan,
                "List every run with its steps done and planned, the time left estimated from the rates measured in "
                "--out, and what the compare would do with it (train; with --resume also keep or resume), then exit: "
                "nothing is trained or written, so it may look into a compare that is running (a snapshot)");
  sub->callback([args] { run_compare(*args); });
}

}  // namespace mixlab::cli
