// mixlab/train/compare.h — seed 000 Table 1 on this machine: every mixer trained on every task
// with the same settings (but a budget or rate per mixer that a preset states and the table shows),
// next to the measured structure of its pattern.
//
// One row per mixer:
//   mixer | structure | time/token and cache (analysis at the longest task sequence T) |
//   shortest path (max over pairs) | congestion (copy routing on T nodes, lower..upper bound) |
//   accuracy per task (held-out token accuracy on answer positions, %) |
//   training tokens/s (mean over the tasks) | decode µs/token (model.step over T tokens, B = 1)
// Mixers that are not pattern mixers (pattern_spec() == "") show the figures of Mixer::cost_figures
// (mixlab/mixer/cost_figures.h): the pattern their graph equals, or counts from their definition.
// A hybrid stack (a per-layer list such as "ssm*3|attention", mixlab/registry/layer_specs.h) is
// one row: structure, cost class, path and congestion per item of its list as written
// ("...*3|causal"), time/token and cache those of its worst layer; the report says so.
//
// Presets (the same for every mixer but the per-mixer budgets and rates below; `set` overrides any config key for all
// runs; task file takes length and vocab from its `data` file, which the other tasks ignore):
//   default  d_model 64, 2 layers, 4 heads, mlp 4, vocab 32, batch 32, no curriculum (too few
//            steps for four phases); tasks copy and recall (compare_preset_tasks). copy L = 16
//            (T = 33), 2000 steps, lr 3e-3, warmup 200. recall S = 64 with 8 pairs: up to 5000
//            steps, wsd schedule, warmup 100, a validation evaluation every 250 steps ending the
//            run at 95 % (stop_at); lr 1e-3, resolvent:dense 2e-3; local:8 and ssm 600 steps (settled at
//            chance: compare_presets.cpp has the evidence). multihop, when named: 600 steps at
//            lr 3e-3, warmup 60 (on the plateau; table1 passes it)
//   table1   seed 000 Table 1's copy, recall and multihop results on this CPU (docs/log/results-2026-11.md,
//            "Seed 000 Table 1 on a CPU"): the default's model and tasks; copy at d_model 128 for
//            14000 steps (the sub-linear tier needs width and steps; attention and the dense
//            recurrence keep 2000, solved there); recall 8000 steps (cosine; local:8 and ssm 600,
//            settled at chance) and multihop 16000 (wsd: its plateau breaks late; local:8 600) at lr 1e-3,
//            warmup 300 (attention does not leave the MQAR plateau at 3e-3 with batch 32), held-out
//            accuracy every 2000 steps in the run's metrics; the table names each task's width
//   default, task lm: Brown bytes (mixlab/train/task_lm.h), window T = 128, 2 layers, 4 heads,
//            batch 16, lr 3e-3, evaluated on the first 16384 valid tokens with stride 64. The
//            width is matched per mixer (compare_matched_d_model): every mixer gets the d_model
//            (a multiple of 2 x heads) whose parameter count is closest to attention's at 64,
//            so mixers compete at (nearly) equal parameter counts. Setting d_model turns this off.
//   paper    seed 000 App. C.3: d_model 256, ff 1024, 2 layers, head dim 64, vocab 8192, 20k
//            steps, 2k warmup, lr 3e-3, batch 1024, beta2 0.98, wd 0.1, copy L = 128,
//            recall/multihop S = 256 with 64 pairs (a GPU-scale budget: days on a CPU)
//
// Outputs in out_dir: compare.csv, compare.json, compare.png (grouped bars: accuracy per task),
// curves_<task>.png, and runs/<mixer>_<task>[_seed<S>][_lr<R>].jsonl (metrics of every run), with
// .pt (its checkpoint) and .result.json (its record) beside it: `--resume` keeps finished runs
// (mixlab/train/compare_run_record.h). With length sweeps also
// by_length.csv (mixer, task, seed, length, rows, token_error, answer_error) and
// by_length_<task>.png (error against length, one line per mixer, mean over seeds).
//
// Preset psm (seed 004 §4.1-4.2 on this CPU; mixlab/train/compare_presets.cpp has the values):
//   s5: train on lengths 4..18 with the length curriculum, sweep lengths 1..180 (Fig. 3);
//   recall: MQAR with 8 pairs, trained with the curriculum up to S = 256, swept at in-distribution
//   lengths (Fig. 4). Run it per task with that task's mixers (scripts/psm_results.sh).
//
// Parallel runs: `jobs` worker threads train (mixer, task) runs concurrently, one intra-op thread
// each (on a 2-core machine two 1-thread runs finish sooner than one 2-thread run for models of
// this size). A run's result depends on its config and its intra-op thread count (which sets
// the order of floating-point reductions), not on the job count: jobs = 1 at one thread and
// jobs = 2 give the same table bit for bit. Training tokens/s are measured with `jobs` runs
// sharing the machine, decode µs/token after all training, one model at a time.
//
// Learning rates: one per preset and task, a rate or step budget per mixer written in the preset
// (shown in the table, never silent), or a sweep (CompareOptions::lrs) choosing per mixer and task
// on a validation split apart from the reported test split.
//
// Curves: every run's metrics are read back after it; the report draws curves_<task>.png
// (held-out accuracy or perplexity and training loss against step, one line per mixer, seed range
// as a band) and prints one sparkline per mixer and task (compare_report.h).
//
// Preset mad (the MAD suite and the classics, mixlab/train/task_mad.h): the seven tasks
//   mad_recall, mad_fuzzy_recall, mad_noisy_recall, selective_copy, mad_compression,
//   mad_memorization, induction at their CPU sizes (tasks.h), one mixer per registered family,
//   MAD's model (d_model 128, 2 layers, 16 heads, no weight decay: with the default preset's
//   d_model 64, 4 heads and weight decay 0.1 attention did not leave the recall tasks' plateau
//   in 2000-18000 steps), batch 32, lr 1e-3 with the wsd schedule, no curriculum, a run stops at
//   99 % held-out answers; 500 steps (memorization), 3000 (selective copying), 4000 (compression,
//   induction), 8000 (recall), 16000 (noisy and fuzzy recall). docs/log/results-2026-11.md,
//   "The MAD suite ...", "The MAD recall tasks with MAD's model ..." and "MAD's compression and
//   induction with 4000 steps" have the curves behind these budgets.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixlab/train/config.h"
#include "mixlab/train/length_sweep.h"
#include "mixlab/train/run_metrics.h"

namespace mixlab {

/// The nine mixers of seed 000 Table 1, in its row order (`--mixers all`).
std::vector<std::string> compare_default_mixers();
/// Preset names: "default", "table1", "paper", "psm", "mad".
const std::vector<std::string>& compare_presets();
/// The tasks a preset runs when --tasks is not given: default copy and recall (multihop needs
/// table1's budget), psm s5 and recall, mad its seven, the others copy, recall and multihop.
std::vector<std::string> compare_preset_tasks(const std::string& preset);
/// The mixers of `--mixers all`: preset mad one spec per registered family (attention, local:8,
/// ssm, resolvent:pow2, each affine member, toeplitz, tpsm, brl), else compare_default_mixers().
std::vector<std::string> compare_preset_mixers(const std::string& preset);
/// The length sweeps a preset runs by default for these tasks, under `overrides` (--set): psm s5
/// and recall; default and table1 copy over the lengths it trains on ([min_length or ceil(L/2), L]).
std::map<std::string, std::vector<int64_t>> compare_preset_sweeps(
    const std::string& preset, const std::vector<std::string>& tasks,
    const nlohmann::json& overrides = nlohmann::json::object());
/// The config of one run: `preset` for `task` and `mixer`, then `overrides` (key -> JSON value).
TrainConfig compare_config(const std::string& preset, const std::string& task, const std::string& mixer,
                           const nlohmann::json& overrides);
/// Parameters of the model `c` builds (built once, without training).
int64_t compare_model_parameters(const TrainConfig& c);
/// The d_model in [d/2, 2d] (multiples of 2 x heads; d = c.d_model) whose model has the
/// parameter count closest to `target` (ties: the one closer to d). Widths the mixer rejects are
/// skipped; returns c.d_model when none is accepted.
int64_t compare_matched_d_model(const TrainConfig& c, int64_t target);

struct CompareOptions {
  std::vector<std::string> tasks = {"copy", "recall", "multihop"};
  std::vector<std::string> mixers;  // empty = compare_default_mixers()
  std::string preset = "default";
  nlohmann::json overrides = nlohmann::json::object();  // config keys applied to every run
  std::string out_dir = "runs/compare";
  bool progress = true;  // one line per run + the trainer's progress lines (stderr)
  int64_t jobs = 1;      // runs trained at the same time (each with one intra-op thread when > 1)
  // Seeds per (mixer, task): run s uses the config's seed + s (model init and batches change).
  // Accuracies are then the mean over seeds, with min..max beside them; must be >= 1.
  int64_t seeds = 1;
  // Length sweeps (seed 004 Fig. 3 / 4; mixlab/train/length_sweep.h): after training, every run
  // of a task listed here is evaluated at each of its lengths on `sweep_rows` held-out rows, the
  // same rows for every mixer and seed. Each such run's model is built with max_len covering
  // the longest sweep length (beyond the training length: length generalisation).
  std::map<std::string, std::vector<int64_t>> sweep_lengths;
  int64_t sweep_rows = 256;
  // Learning-rate sweep (`--lr 1e-3,3e-3`): every (mixer, task, seed) trains at each rate; per
  // (mixer, task) the rate with the best mean over seeds on the validation split wins (token
  // accuracy, ties by loss; lm: the lowest loss), and the cells report that rate's runs on the
  // test split (tasks.h, EvalSplit: for lm the test stream, no longer the valid one). Empty: the
  // preset's rate (which may name one per mixer, compare_preset_lr). Each rate > 0.
  std::vector<double> lrs;
  // Keep the runs a previous compare into out_dir finished (`--resume`): a run whose record
  // (<out>/runs/<base>.result.json, mixlab/train/compare_run_record.h) exists is not trained
  // again, its model is read from its checkpoint; a run with a checkpoint and no record resumes
  // from that checkpoint (written at every eval_every evaluation unless checkpoint_every is
  // set). A record or checkpoint of other settings is an error. A run's files under the name an
  // earlier compare with one seed or without a sweep gave it (no _seed<S>, no _lr<R>) are its
  // own when their config equals the run's: they take its name, so more seeds or rates train only
  // the new runs (a kept run outside a sweep gets its validation split evaluated). Without it,
  // every run trains from its start and replaces what the directory held.
  bool resume = false;
  // `--plan`: validate everything as a compare does, read what out_dir holds (with `resume`, the
  // step of every record and checkpoint), fill CompareReport::plan and return: nothing is
  // trained, written, removed or locked, so it may look into a directory a compare is running in.
  bool plan_only = false;
  // Called once every option, spec and record is validated, before anything is written under
  // out_dir (the CLI creates and locks the directory here, so a rejected compare touches nothing).
  std::function<void(const std::string& out_dir)> before_first_write;
};

/// One rate's runs of a (mixer, task) in a learning-rate sweep: the validation figure the choice
/// read (mean over seeds) and the test accuracy or loss beside it.
struct LrTrial {
  double lr = 0;
  double valid_token_acc = 0, valid_loss = 0;  // means over seeds
  double test_token_acc = 0, test_loss = 0;
};

/// One run as `compare --plan` lists it (CompareOptions::plan_only), in the order the runs are
/// listed (mixer, task, rate, seed), not the order they are handed out.
struct ComparePlannedRun {
  enum class State {
    kTrain,   // trains from its start
    kResume,  // --resume: trains on from its checkpoint at `step`
    kKept,    // --resume: finished (its record, at `step`), not trained
  };
  std::string mixer, task;
  uint64_t seed = 0;  // the run's own seed (the config's plus the seed offset)
  double lr = 0;      // the run's rate
  int64_t steps = 0;  // planned (a run may stop earlier: stop_at)
  int64_t step = 0;   // done: a kept run's record, a resumed run's checkpoint; 0 for kTrain
  State state = State::kTrain;
  bool replaces = false;  // without --resume: an earlier compare's record or checkpoint under its
                          // name, which the compare removes before its first run
  std::string base;       // <out>/runs/<compare_run_base>
  // --resume: the base an earlier compare gave this run's files (one seed: no _seed<S>; no sweep:
  // no _lr<R>; or the other way round), moved to `base` before the first run; "" otherwise.
  std::string adopted_from;
  // --resume: files under such another base that were not taken (other settings, or damaged), and
  // why; "" when none was there.
  std::string not_taken;
  // The run time left, estimated from the rates of its mixer's runs whose metrics are in the
  // directory (tokens per second, applied to the tokens it has left); 0 when kept, -1 when no run
  // of its mixer has metrics there. One run at a time, under the load those runs had.
  double seconds_left = -1;
};

struct CompareRow {
  std::string mixer;
  bool ran = false;
  std::string note;        // why the mixer failed (ran = false)
  std::string structure;   // pattern structure name, or the mixer's spec
  std::string pattern;     // pattern spec, "" for non-pattern mixers
  std::string cost_class;  // asymptotic decode cost class of the mixer
  int64_t analysis_T = 0;
  int64_t cost_max = -1;   // max |P(i)| at T (-1: not a pattern mixer)
  int64_t cache_max = -1;  // max cache at T
  std::string shortest;    // "3", "∞", "—"
  std::string congestion;  // "4" or "3..5", "—"
  // Non-pattern families (Mixer::cost_figures): what the four figures above are, "" for patterns.
  std::string analysis_basis;
  std::map<std::string, double> token_acc;   // per task, in [0, 1]
  std::map<std::string, double> answer_acc;  // per task, in [0, 1]
  std::map<std::string, double> eval_loss;   // per task, held-out cross-entropy per scored token
  std::map<std::string, double> chain_acc;   // multihop: accuracy on queries that follow >= 1 link
  // lm: valid perplexity and bits per byte, every seed's value (seed order).
  std::map<std::string, std::vector<double>> ppl_seeds, bpb_seeds;
  int64_t d_model = 0;  // the width used (matched per mixer on lm)
  // With several seeds the maps above hold the mean; these hold every seed's value (seed order).
  std::map<std::string, std::vector<double>> token_acc_seeds, chain_acc_seeds;
  // recall/multihop: query accuracy by number of links (index 0 = direct), mean over seeds.
  std::map<std::string, std::vector<double>> hop_acc;
  // Length sweeps: per task, one vector per seed (seed order) of the errors at the sweep lengths.
  std::map<std::string, std::vector<std::vector<LengthError>>> sweep;
  // The learning rate of the runs each task's cells report (the sweep's choice, else the config's),
  // and with a sweep every rate tried (CompareOptions::lrs).
  std::map<std::string, double> lr;
  std::map<std::string, std::vector<LrTrial>> lr_trials;
  // Steps of the reported runs per task: planned (the config's) and trained, one per seed (fewer
  // when stop_at ended a run early).
  std::map<std::string, int64_t> steps_planned;
  std::map<std::string, std::vector<int64_t>> steps_trained;
  // Curves of the reported runs, one per seed (seed order), from their metrics: the held-out
  // figure at each evaluation (token accuracy; lm: perplexity) and the training loss.
  std::map<std::string, std::vector<MetricCurve>> eval_curves, loss_curves;
  double train_tokens_per_s = 0;
  double decode_us_per_token = 0;
  // The model's parameter count: lm's (its width is matched per mixer) where lm ran, else the last
  // task's; parameters_by_task has every task's (table1 trains copy at a wider d_model).
  int64_t parameters = 0;
  std::map<std::string, int64_t> parameters_by_task;
  double seconds = 0;  // training wall time over all tasks
  // A hybrid (a per-layer mixer list, mixlab/registry/layer_specs.h): structure, pattern, cost
  // class, path and congestion hold one value per item of the list as written ("order:1*3|causal"),
  // cost_max and cache_max the worst layer with a pattern (-1 when none has one).
  bool per_layer = false;
};

struct CompareReport {
  std::string preset;
  std::vector<std::string> tasks;
  std::vector<CompareRow> rows;
  nlohmann::json
      config_example;  // the resolved config of the first run (a preset may vary steps, lr or width by mixer or task)
  double seconds = 0;
  int64_t jobs = 1;                                // concurrent runs used
  int64_t seeds = 1;                               // runs per (mixer, task)
  std::map<std::string, int64_t> trained_length;   // per task, the task length the runs trained on
  std::map<std::string, int64_t> d_model_by_task;  // per task but lm, the model width (table1's copy is wider)
  std::vector<double> lrs;                         // the sweep's rates (empty: no sweep)
  std::string native_kernels;  // cpu_isa_name of the instruction set mixlab's kernels ran (mixlab/core/cpu_isa.h)
  std::string blas;            // blas_summary(): the BLAS library and kernels (mixlab/core/blas_info.h)
  // Runs (mixer, task, rate, seed); with --resume those kept from a previous compare (not
  // trained) and those resumed from a checkpoint.
  int64_t runs = 0, runs_kept = 0, runs_resumed = 0;
  // CompareOptions::plan_only: every run and its state; rows stay empty.
  std::vector<ComparePlannedRun> plan;
};

/// Mean, min and max of one cell over seeds (all 0 for no value).
struct SeedStats {
  double mean = 0, lo = 0, hi = 0;
};
SeedStats seed_stats(const std::vector<double>& values);

/// Trains and measures every (mixer, task); writes metrics under out_dir/runs.
/// Every (mixer, task) config and mixer spec is validated before the first run: a bad spec, an
/// unknown family or task throws mixlab::Error at once. A run that then fails with a caller error
/// (mixlab::Error) becomes a "failed" row; any other exception is a bug and propagates.
/// The printed table and the files are in mixlab/train/compare_report.h.
CompareReport compare_run(const CompareOptions& options);

}  // namespace mixlab
