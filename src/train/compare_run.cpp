// `mixlab compare`: runs and schedules every (mixer, task), then measures decode speed and the
// pattern analysis of each mixer (mixlab/train/compare.h). Reporting is compare_report.cpp.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "mixlab/analysis/analyze.h"
#include "mixlab/analysis/format.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/core/blas_info.h"
#include "mixlab/core/cpu_isa.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/model/init_lock.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/compare_run_record.h"
#include "mixlab/train/run_metrics.h"
#include "mixlab/train/trainer.h"

namespace mixlab {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The check `train` makes too (check_mixer_layer_specs), so that every spec error (unknown family, bad
// parameters, a pattern the kernel rejects at this width) surfaces before any training.
void check_run_spec(const TrainConfig& c) {
  try {
    check_mixer_layer_specs(c.mixer, c.layers, MixerDims{c.d_model, c.heads, config_max_len(c)});
  } catch (const Error& e) {
    MIXLAB_FAIL("compare: mixer '{}' (task {}): {}", c.mixer, c.task.name, e.what());
  }
}

// A run's cumulative training tokens and seconds (they carry on across a resume): its last
// metrics line that has both, with seconds > 0; {0, 0} when none has.
std::pair<double, double> metrics_tokens_seconds(const std::vector<json>& lines) {
  std::pair<double, double> out{0, 0};
  for (const auto& line : lines)
    if (line.contains("tokens") && line.contains("seconds") && line.at("tokens").is_number() &&
        line.at("seconds").is_number() && line.at("seconds").get<double>() > 0)
      out = {line.at("tokens").get<double>(), line.at("seconds").get<double>()};
  return out;
}

// Decode speed: model.step over T random tokens, B = 1, after a short warm-up.
double decode_us_per_token(DecoderModel& model, int64_t T) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto tokens = torch::randint(kFirstContentToken, model.dims().vocab, {1, T}, torch::kInt64);
  {
    auto warm = model.init_state(1);
    for (int64_t t = 0; t < std::min<int64_t>(T, 8); ++t) model.step(warm, tokens.select(1, t));
  }
  auto state = model.init_state(1);
  const auto t0 = Clock::now();
  for (int64_t t = 0; t < T; ++t) model.step(state, tokens.select(1, t));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 1e6 * s / static_cast<double>(T);
}

// The analysis columns of one mixer.
struct MixerAnalysis {
  std::string structure, pattern, cost_class, shortest = "—", congestion = "—", basis;
  int64_t cost_max = -1, cache_max = -1;
};

// A pattern mixer: its pattern measured by the analysis. Any other family: the pattern its graph
// equals, measured the same way, or the figures it counts from its own definition
// (Mixer::cost_figures); `basis` then says which.
MixerAnalysis analyze_mixer(Mixer& mixer, int64_t T) {
  MixerAnalysis a;
  a.cost_class = mixer.cost_class();
  a.pattern = mixer.pattern_spec();
  std::string measured = a.pattern;
  if (a.pattern.empty()) {
    const MixerCostFigures f = mixer.cost_figures(T);
    a.structure = f.structure.empty() ? mixer.spec() : f.structure;
    a.basis = f.basis;
    if (f.empty()) return a;
    if (f.equivalent_pattern.empty()) {
      a.cost_max = f.time_max;
      a.cache_max = f.cache_max;
      a.shortest = f.shortest;
      a.congestion = f.congestion;
      return a;
    }
    measured = f.equivalent_pattern;
  }
  const Pattern p = Pattern::parse(measured);
  const PatternReport r = analyze_pattern(p, T, AnalyzeOptions{});
  if (!a.pattern.empty()) a.structure = r.structure;
  a.cost_max = r.cost_max;
  a.cache_max = r.cache_max;
  a.shortest = format_shortest_path(r.shortest_path);
  a.congestion = format_congestion(r.congestion);
  return a;
}

// A single-spec model: its one mixer's columns. A hybrid (a per-layer list, layer_specs.h): the
// text columns per item of the list as written ("ssm*3|attention" -> pattern "order:1*3|causal"),
// time/tok and cache the worst layer that has a pattern (CompareRow::per_layer; the report says so).
void fill_analysis(CompareRow& row, DecoderModel& model, int64_t T) {
  row.analysis_T = T;
  if (!mixer_spec_is_layer_list(row.mixer)) {
    const MixerAnalysis a = analyze_mixer(model.blocks().front()->mixer(), T);
    row.cost_class = a.cost_class;
    row.pattern = a.pattern;
    row.structure = a.structure;
    row.cost_max = a.cost_max;
    row.cache_max = a.cache_max;
    row.shortest = a.shortest;
    row.congestion = a.congestion;
    row.analysis_basis = a.basis;
    return;
  }
  row.per_layer = true;
  std::map<std::string, MixerAnalysis> done;  // one analysis per distinct member
  std::vector<std::string> structure, pattern, cost_class, shortest, congestion, basis;
  int64_t block = 0;
  for (const auto& item : mixer_layer_list(row.mixer, model.dims().layers)) {
    Mixer& mixer = model.blocks()[static_cast<size_t>(block)]->mixer();
    block += item.count;
    auto it = done.find(item.spec);
    if (it == done.end()) it = done.emplace(item.spec, analyze_mixer(mixer, T)).first;
    const MixerAnalysis& a = it->second;
    const std::string times = item.count > 1 ? fmt::format("*{}", item.count) : std::string();
    structure.push_back(a.structure + times);
    pattern.push_back((a.pattern.empty() ? "—" : a.pattern) + times);
    cost_class.push_back(a.cost_class + times);
    shortest.push_back(a.shortest + times);
    congestion.push_back(a.congestion + times);
    if (!a.basis.empty()) basis.push_back(item.spec + ": " + a.basis);
    row.cost_max = std::max(row.cost_max, a.cost_max);
    row.cache_max = std::max(row.cache_max, a.cache_max);
  }
  row.structure = fmt::format("{}", fmt::join(structure, "|"));
  row.pattern = fmt::format("{}", fmt::join(pattern, "|"));
  row.cost_class = fmt::format("{}", fmt::join(cost_class, "|"));
  row.shortest = fmt::format("{}", fmt::join(shortest, "|"));
  row.congestion = fmt::format("{}", fmt::join(congestion, "|"));
  std::sort(basis.begin(), basis.end());
  basis.erase(std::unique(basis.begin(), basis.end()), basis.end());
  row.analysis_basis = fmt::format("{}", fmt::join(basis, "; "));
}

}  // namespace

SeedStats seed_stats(const std::vector<double>& v) {
  SeedStats s;
  if (v.empty()) return s;
  s.lo = *std::min_element(v.begin(), v.end());
  s.hi = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

CompareReport compare_run(const CompareOptions& o) {
  MIXLAB_CHECK(!o.tasks.empty(), "compare: the task list is empty");
  MIXLAB_CHECK(o.seeds >= 1, "compare: --seeds must be >= 1 (runs per mixer and task), got {}", o.seeds);
  for (const auto& t : o.tasks) {
    const auto& names = task_names();
    MIXLAB_CHECK(std::find(names.begin(), names.end(), t) != names.end(), "compare: unknown task '{}' (known: {})", t,
                 fmt::join(names, ", "));
  }
  CompareReport rep;
  rep.preset = o.preset;
  rep.tasks = o.tasks;
  rep.seeds = o.seeds;
  // What the figures belong to besides the code: the native kernels' instruction set and the BLAS
  // kernels (every cell that moves with the last bits moves with them). cpu_isa() throws for a bad
  // MIXLAB_CPU_ISA, here before any training rather than in the first kernel call.
  rep.native_kernels = cpu_isa_name(cpu_isa());
  rep.blas = blas_summary();
  const std::vector<std::string> mixers = o.mixers.empty() ? compare_default_mixers() : o.mixers;
  MIXLAB_CHECK(!mixers.empty(), "compare: the mixer list is empty");
  // Validate every (mixer, task) before the first (long) run, so a typo in the last spec fails
  // in a second instead of after minutes of training.
  // lm: every mixer at (nearly) attention's parameter count (compare.h), unless d_model is set.
  std::map<std::string, int64_t> lm_width;
  if (std::find(o.tasks.begin(), o.tasks.end(), "lm") != o.tasks.end() && !o.overrides.contains("d_model")) {
    const int64_t target = compare_model_parameters(compare_config(o.preset, "lm", "attention", o.overrides));
    for (const auto& spec : mixers) {
      const TrainConfig c = compare_config(o.preset, "lm", spec, o.overrides);
      check_run_spec(c);
      lm_width[spec] = compare_matched_d_model(c, target);
    }
  }
  MIXLAB_CHECK(o.sweep_rows >= 1, "compare: sweep rows must be >= 1, got {}", o.sweep_rows);
  for (double lr : o.lrs)
    MIXLAB_CHECK(std::isfinite(lr) && lr > 0, "compare: --lr expects learning rates > 0, got {}", lr);
  const bool lr_sweep = o.lrs.size() > 1;
  if (lr_sweep) {
    // The choice reads a validation split apart from the reported one (tasks.h, EvalSplit).
    MIXLAB_CHECK(std::find(o.tasks.begin(), o.tasks.end(), "file") == o.tasks.end(),
                 "compare: --lr with several rates chooses on a validation split apart from the reported one; task "
                 "file has one held-out set (eval_data, else its last rows), so sweep it with one --lr per command");
  }
  // The rates a (mixer, task) trains at: the sweep's, else 0 = the preset's own (compare_config).
  const std::vector<double> run_lrs = o.lrs.empty() ? std::vector<double>{0.0} : o.lrs;
  for (const auto& [task, lengths] : o.sweep_lengths) {
    MIXLAB_CHECK(std::find(o.tasks.begin(), o.tasks.end(), task) != o.tasks.end(),
                 "compare: --sweep names task '{}', which is not in --tasks ({})", task, fmt::join(o.tasks, ", "));
    MIXLAB_CHECK(!lengths.empty(), "compare: --sweep for task '{}' has no length", task);
  }
  auto config_of = [&](const std::string& task, const std::string& spec, double lr) {
    json ov = o.overrides;
    if (lr > 0) ov["lr"] = lr;
    if (task == "lm" && lm_width.count(spec)) ov["d_model"] = lm_width.at(spec);
    TrainConfig c = compare_config(o.preset, task, spec, ov);
    // Each run on one row group unless the user asks (--set row_groups=N): automatic groups
    // follow the thread count, which --jobs changes, and the table must not depend on --jobs.
    if (c.row_groups == 0) c.row_groups = 1;
    // A checkpoint at every held-out evaluation unless the user sets checkpoint_every: an
    // interrupted compare then resumes a long run (preset mad's 16000 steps, about 30 min here)
    // from its last evaluation, not from its start. Saving reads the generator, changes nothing.
    if (c.checkpoint_every == 0 && !ov.contains("checkpoint_every")) c.checkpoint_every = c.eval_every;
    auto sweep = o.sweep_lengths.find(task);
    if (sweep != o.sweep_lengths.end()) {
      // The model must hold the longest swept sequence (length generalisation beyond training).
      const int64_t longest = *std::max_element(sweep->second.begin(), sweep->second.end());
      const int64_t T = task == "s5" ? longest : task_sequence_length(c.task, longest);
      if (T > config_max_len(c)) {
        c.max_len = T;
        config_validate(c, fmt::format("compare --sweep for {}/{}", spec, task));
      }
    }
    return c;
  };
  int64_t T = 1;
  for (const auto& spec : mixers)
    for (const auto& t : o.tasks) {
      TrainConfig c = config_of(t, spec, run_lrs.front());
      for (double lr : run_lrs) c = config_of(t, spec, lr);  // every rate's config is valid
      check_run_spec(c);
      // A bad sweep (e.g. a recall length too short for the pairs) fails now, not after training.
      if (auto sweep = o.sweep_lengths.find(t); sweep != o.sweep_lengths.end()) {
        try {
          length_sweep_check(c.task, sweep->second, config_max_len(c));
        } catch (const Error& e) {
          MIXLAB_FAIL("compare: --sweep for {}/{}: {}", spec, t, e.what());
        }
      }
      T = std::max(T, task_sequence_length(c.task, c.task.length));
      if (rep.config_example.is_null()) rep.config_example = config_to_json(c);
      rep.trained_length[t] = c.task.length;
      if (t != "lm") rep.d_model_by_task[t] = c.d_model;  // lm's width is matched per mixer (its own column)
    }
  const std::string runs_dir = o.out_dir + "/runs";
  const auto t_all = Clock::now();

  // One job per (mixer, task). Jobs run on o.jobs worker threads, each with one intra-op
  // thread; a job's result depends only on its own config (the model is initialised under a
  // lock right after seeding the global generator, and batches come from the task's own RNG),
  // so the table is the same for every job count.
  struct Job {
    size_t mixer = 0, task = 0;
    int64_t seed = 0;    // offset added to the config's seed
    double lr = 0;       // the sweep's rate (0: the preset's)
    TrainConfig config;  // the run's settings before its seed offset (validated above; its steps
                         // are the plan, the run may stop earlier: stop_at)
    TrainResult result;
    EvalResult valid, test;              // lr sweep: the validation split (the choice) and the test split (the cells)
    MetricCurve eval_curve, loss_curve;  // from the run's metrics file
    std::shared_ptr<DecoderModel> model;
    int64_t parameters = 0;
    std::string error;
    std::vector<LengthError> sweep;  // the task's length sweep, if any
    std::string base;                // <out>/runs/<compare_run_base>: the run's files, a suffix each
    std::string adopt_from;          // --resume: the base an earlier compare gave this run's files
    std::string not_taken;           // --resume: files under such a base that were not this run's, and why
    // --resume: what the files hold, checked before the first run (a kept run's record with it).
    ComparePlannedRun::State state = ComparePlannedRun::State::kTrain;
    std::optional<CompareRunRecord> record;
    bool kept = false, resumed = false;  // --resume: not trained / trained on from a checkpoint
  };
  std::vector<Job> jobs;
  for (size_t m = 0; m < mixers.size(); ++m)
    for (size_t t = 0; t < o.tasks.size(); ++t)
      for (double lr : run_lrs)
        for (int64_t sd = 0; sd < o.seeds; ++sd) {
          Job job;
          job.mixer = m;
          job.task = t;
          job.seed = sd;
          job.lr = lr;
          job.config = config_of(o.tasks[t], mixers[m], lr);
          const TrainConfig& c = job.config;
          job.base =
              runs_dir + "/" +
              compare_run_base(mixers[m], o.tasks[t], c.seed + static_cast<uint64_t>(sd), o.seeds > 1, c.lr, lr_sweep);
          jobs.push_back(std::move(job));
        }
  const int64_t n_jobs = static_cast<int64_t>(jobs.size());
  {
    // Every run's files are its own: two runs under one name would append to one metrics file and
    // replace each other's checkpoint and record.
    std::map<std::string, size_t> by_base;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto [it, fresh] = by_base.emplace(jobs[i].base, i);
      const Job& other = jobs[it->second];
      MIXLAB_CHECK(fresh,
                   "compare: {} on {} is listed twice (runs {} and {} would share the files {}.*): give each mixer and "
                   "task once",
                   mixers[other.mixer], o.tasks[other.task], it->second + 1, i + 1, jobs[i].base);
    }
  }
  auto file_exists = [](const std::string& path) {
    std::error_code ec;
    const bool there = std::filesystem::exists(path, ec);
    MIXLAB_CHECK_IO(!ec, "compare: cannot look for {}: {}", path, ec.message());
    return there;
  };
  // What a run's files under `base` hold (--resume): a finished run (its record, of this config
  // and these kernels, with its checkpoint at the record's step), an unfinished one (a checkpoint
  // of this config) or nothing. Anything else throws, naming the file.
  struct RunFiles {
    ComparePlannedRun::State state = ComparePlannedRun::State::kTrain;
    int64_t step = 0;
    bool any = false;                        // a record or a checkpoint is there
    std::optional<CompareRunRecord> record;  // kKept: the record, read and checked once, here
  };
  auto inspect = [&](const std::string& base, const TrainConfig& c) {
    RunFiles f;
    const std::string record_path = base + ".result.json", checkpoint_path = base + ".pt";
    const bool has_record = file_exists(record_path), has_checkpoint = file_exists(checkpoint_path);
    f.any = has_record || has_checkpoint;
    if (has_record) {
      CompareRunRecord r = compare_run_record_read(record_path, c);
      MIXLAB_CHECK(r.native_kernels == rep.native_kernels && r.blas == rep.blas,
                   "compare run record '{}': was computed with other kernels (native {}, BLAS {}; here native {}, "
                   "BLAS {}), so its cells are not this machine's: use another --out, or remove it to train the run "
                   "again",
                   record_path, shown_text(r.native_kernels), shown_text(r.blas), rep.native_kernels, rep.blas);
      f.state = ComparePlannedRun::State::kKept;
      f.step = r.result.step;
      f.record = std::move(r);
    }
    if (has_checkpoint) {
      const LoadedCheckpoint checkpoint = checkpoint_read(checkpoint_path);
      const std::string diff = compare_config_difference(checkpoint.config, c);
      MIXLAB_CHECK(diff.empty(),
                   "compare --resume: {}: was trained with other settings ({}); use another --out, or remove it to "
                   "train the run again",
                   checkpoint_prefix(checkpoint_path), diff);
      if (has_record)
        MIXLAB_CHECK(checkpoint.step == f.step,
                     "compare --resume: {} is at step {}, its record {} at step {}; remove both to train the run again",
                     checkpoint_prefix(checkpoint_path), checkpoint.step, record_path, f.step);
      else
        f.state = ComparePlannedRun::State::kResume, f.step = checkpoint.step;
    } else {
      // A kept run's model comes from its checkpoint (decode timings, length sweeps).
      MIXLAB_CHECK(!has_record,
                   "compare --resume: {} has no checkpoint {} beside it (the run's model); remove the record to train "
                   "the run again",
                   record_path, checkpoint_path);
    }
    return f;
  };
  // --resume: every record and checkpoint that is there must describe its run, checked now rather
  // than as a failed row after hours of the other runs' training. A run with no files under its
  // name may have them under the name an earlier compare gave it: without _seed<S> when that
  // compare ran one seed, without _lr<R> when it swept no rate (or with them, the other way
  // round). Such files are the run's when their config is this run's key for key (seed and rate
  // included); they are moved to the run's name before the first run, so adding seeds or rates to
  // a finished compare trains only the new runs. --plan reads the same files for each run's state.
  if (o.resume || o.plan_only)
    for (auto& job : jobs) {
      TrainConfig c = job.config;
      c.seed += static_cast<uint64_t>(job.seed);
      ComparePlannedRun planned;
      planned.mixer = mixers[job.mixer];
      planned.task = o.tasks[job.task];
      planned.seed = c.seed;
      planned.lr = c.lr;
      planned.steps = c.steps;
      planned.base = job.base;
      if (!o.resume) {
        planned.replaces = file_exists(job.base + ".result.json") || file_exists(job.base + ".pt");
        rep.plan.push_back(planned);
        continue;
      }
      RunFiles f = inspect(job.base, c);
      for (const bool seed_suffix : {false, true})
        for (const bool lr_suffix : {false, true}) {
          const std::string other =
              runs_dir + "/" +
              compare_run_base(mixers[job.mixer], o.tasks[job.task], c.seed, seed_suffix, c.lr, lr_suffix);
          if (other == job.base || !job.adopt_from.empty()) continue;
          const std::string name = std::filesystem::path(other).filename().string();
          if (!f.any) {
            try {
              f = inspect(other, c);
            } catch (const IoError&) {
              throw;
            } catch (const Error& e) {
              // Files of other settings, or damaged ones: not this run's, and the plan says why.
              f = RunFiles{};
              if (job.not_taken.empty()) job.not_taken = fmt::format("{}.* not taken: {}", name, e.what());
            }
            if (f.any) job.adopt_from = other;
          } else if (f.state == ComparePlannedRun::State::kResume && file_exists(other + ".result.json") &&
                     !file_exists(other + ".pt")) {
            // A compare killed between renaming this run's checkpoint and its record: the record
            // at the checkpoint's step, of this config and kernels, completes the move.
            try {
              CompareRunRecord r = compare_run_record_read(other + ".result.json", c);
              if (r.result.step == f.step && r.native_kernels == rep.native_kernels && r.blas == rep.blas)
                job.adopt_from = other, f.state = ComparePlannedRun::State::kKept, f.record = std::move(r);
            } catch (const IoError&) {
              throw;
            } catch (const Error&) {
            }
          }
        }
      planned.state = f.state;
      planned.step = f.step;
      job.state = f.state;
      job.record = std::move(f.record);
      planned.adopted_from = job.adopt_from;
      planned.not_taken = job.not_taken;
      rep.plan.push_back(planned);
    }
  if (o.plan_only) {
    rep.runs = n_jobs;
    for (const auto& p : rep.plan)
      rep.runs_kept += p.state == ComparePlannedRun::State::kKept,
          rep.runs_resumed += p.state == ComparePlannedRun::State::kResume;
    // The time left, estimated from the rates measured here: per mixer, the tokens and seconds of
    // the metrics of every run of it in the directory (kept, cut or running), applied to the
    // tokens each run has left. A rate is the mixer's under that run's task length and load, so
    // this is a rough guide, not a promise; a mixer with no metrics yet gets none.
    std::map<std::string, std::pair<double, double>> measured;  // mixer: tokens, seconds
    for (const auto& p : rep.plan) {
      const std::string metrics = (p.adopted_from.empty() ? p.base : p.adopted_from) + ".jsonl";
      if (!file_exists(metrics)) continue;
      const auto [tokens, seconds] = metrics_tokens_seconds(read_metrics_lines(metrics));
      if (tokens > 0 && seconds > 0) measured[p.mixer].first += tokens, measured[p.mixer].second += seconds;
    }
    for (size_t i = 0; i < rep.plan.size(); ++i) {
      ComparePlannedRun& p = rep.plan[i];
      const TrainConfig& c = jobs[i].config;
      const double tokens_left =
          p.state == ComparePlannedRun::State::kKept
              ? 0.0
              : double(p.steps - p.step) * double(c.batch) * double(task_sequence_length(c.task, c.task.length));
      const auto rate = measured.find(p.mixer);
      if (tokens_left == 0)
        p.seconds_left = 0;
      else if (rate != measured.end())
        p.seconds_left = tokens_left * rate->second.second / rate->second.first;
    }
    return rep;
  }
  rep.plan.clear();
  if (o.before_first_write) o.before_first_write(o.out_dir);
  {
    std::error_code ec;
    std::filesystem::create_directories(runs_dir, ec);
    MIXLAB_CHECK_IO(!ec, "compare: cannot create {}: {}", runs_dir, ec.message());
  }
  // --resume: files an earlier compare named otherwise take this run's name, the record last (the
  // next --resume after a kill in between finds the checkpoint here and the record there at its
  // step, and finishes the move; see the loop above).
  for (const auto& job : jobs)
    if (!job.adopt_from.empty())
      for (const char* suffix : {".jsonl", ".pt", ".result.json"})
        if (file_exists(job.adopt_from + suffix)) durable_rename(job.adopt_from + suffix, job.base + suffix);
  if (!o.resume) {
    // Every run trains from its start: what an earlier compare left under these names goes now,
    // not when each run is handed out, so a compare killed before its last run leaves no record
    // of other settings for a later --resume to trip over.
    for (const auto& job : jobs)
      for (const std::string& old : {job.base + ".result.json", job.base + ".pt"}) {
        std::error_code ec;
        std::filesystem::remove(old, ec);
        MIXLAB_CHECK_IO(!ec, "compare: cannot remove {} of an earlier compare: {}", old, ec.message());
      }
  }
  // Largest planned run first: the workers then end together instead of one long run starting
  // last and running alone (the default preset's dense recall run, its longest, was handed out
  // fifth). A run's plan is its tokens, steps x batch x sequence length, times d_model (table1's
  // copy runs at d_model 128 cost 2.3x a step of 64 on the same tokens, and were handed out last
  // when the plan counted tokens only); early stops cut it short, so this is a heuristic, and the
  // results do not depend on the order.
  std::vector<int64_t> dispatch(static_cast<size_t>(n_jobs));
  {
    std::vector<double> planned(dispatch.size());
    for (int64_t i = 0; i < n_jobs; ++i) {
      const TrainConfig& c = jobs[static_cast<size_t>(i)].config;
      planned[static_cast<size_t>(i)] =
          double(c.steps) * double(c.batch) * double(task_sequence_length(c.task, c.task.length)) * double(c.d_model);
      dispatch[static_cast<size_t>(i)] = i;
    }
    std::stable_sort(dispatch.begin(), dispatch.end(),
                     [&](int64_t a, int64_t b) { return planned[size_t(a)] > planned[size_t(b)]; });
  }
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(o.jobs, n_jobs));
  std::mutex log_mutex;
  std::atomic<int64_t> next{0};
  std::exception_ptr bug;  // the first non-user error of any worker
  auto log = [&](const std::string& line) {
    if (!o.progress) return;
    std::lock_guard<std::mutex> lock(log_mutex);
    std::cerr << line;
  };
  auto work = [&] {
    // OpenMP keeps the thread count per thread: a new std::thread starts with the process
    // default (all cores), not with the caller's setting, so each worker sets its own.
    if (workers > 1) at::set_num_threads(1);
    for (int64_t n = next++; n < n_jobs; n = next++) {
      const int64_t i = dispatch[static_cast<size_t>(n)];
      Job& job = jobs[static_cast<size_t>(i)];
      const std::string& spec = mixers[job.mixer];
      const std::string& task = o.tasks[job.task];
      try {
        TrainConfig c = job.config;
        job.lr = c.lr;
        const uint64_t rows_seed = c.seed;  // sweep rows: the same for every mixer and seed
        c.seed += static_cast<uint64_t>(job.seed);
        const std::string record_path = job.base + ".result.json", checkpoint_path = job.base + ".pt";
        // --resume: a finished run's record (read and checked before the first run) and its
        // checkpoint; an unfinished one's checkpoint alone. Read before the model exists, outside
        // the init lock.
        const std::optional<CompareRunRecord>& kept = job.record;
        std::optional<LoadedCheckpoint> checkpoint;
        if (job.state != ComparePlannedRun::State::kTrain) checkpoint = checkpoint_read(checkpoint_path);
        std::unique_ptr<Trainer> trainer;
        {
          // The global generator seeds the init, and a checkpoint restores it: both under the lock.
          std::lock_guard<std::mutex> lock(model_init_mutex());
          trainer = std::make_unique<Trainer>(c);
          if (checkpoint) trainer->checkpoint_load(*checkpoint);
        }
        job.parameters = trainer->model().parameter_count();
        TrainOptions to;
        to.progress = o.progress;
        to.label = "  " + spec + "/" + task;
        to.metrics_path = job.base + ".jsonl";
        to.checkpoint_path = checkpoint_path;
        std::vector<json> lines;  // the run's metrics
        if (kept) {
          log(fmt::format("compare: run {}/{}: {} on {}: kept from {} (step {}{}{})\n", n + 1, n_jobs, spec, task,
                          record_path, kept->result.step, lr_sweep ? fmt::format(", lr {:g}", c.lr) : std::string(),
                          job.adopt_from.empty() ? std::string() : ", named " + job.adopt_from + " before"));
          MIXLAB_CHECK(kept->parameters == job.parameters, "{}: the record's model has {} parameters, this build's {}",
                       record_path, kept->parameters, job.parameters);
          job.result = kept->result;
          job.test = kept->test;
          job.valid = kept->valid;
          job.kept = true;
          if (!lr_sweep) {
            job.test = kept->result.eval;  // what a run outside a sweep reports (a swept run's record: its test split)
          } else if (kept->valid.answer_tokens == 0) {
            // Kept from a compare without a sweep, which evaluated the report split only: the
            // choice needs the other one, evaluated now on the checkpoint's weights (the same
            // weights and held-out rows as at the run's end) and added to the record.
            if (task_report_split(c.task) == EvalSplit::kTest)
              job.valid = trainer->evaluate(EvalSplit::kValid), job.test = kept->result.eval;
            else
              job.valid = kept->result.eval, job.test = trainer->evaluate(EvalSplit::kTest);
            compare_run_record_write(
                record_path, {c, job.result, job.valid, job.test, job.parameters, rep.native_kernels, rep.blas});
          }
        } else {
          log(fmt::format("compare: run {}/{}: {} on {} ({} parameters, {} steps, seed {}{}{}{})\n", n + 1, n_jobs,
                          spec, task, job.parameters, c.steps, c.seed,
                          lr_sweep ? fmt::format(", lr {:g}", c.lr) : std::string(),
                          checkpoint ? fmt::format(", resumed at step {}", checkpoint->step) : std::string(),
                          job.not_taken.empty() ? std::string() : "; " + job.not_taken));
          job.resumed = checkpoint.has_value();
          job.result = trainer->run(to);
          lines = read_metrics_lines(to.metrics_path);
          if (job.resumed) {
            // This process trained only the steps after the checkpoint (none, resumed at the last):
            // the run's seconds and rate are those of its metrics, which carry on across a resume.
            const auto [tokens, seconds] = metrics_tokens_seconds(lines);
            if (seconds > 0) job.result.seconds = seconds, job.result.tokens_per_s = tokens / seconds;
          }
          job.test = job.result.eval;
          if (lr_sweep) {
            // The run evaluated its report split; the other one completes the pair (lm reports valid).
            if (task_report_split(c.task) == EvalSplit::kTest) {
              job.valid = trainer->evaluate(EvalSplit::kValid);
            } else {
              job.valid = job.result.eval;
              job.test = trainer->evaluate(EvalSplit::kTest);
            }
          }
          // Last: a record exists only for a run whose checkpoint and evaluations are complete.
          compare_run_record_write(record_path,
                                   {c, job.result, job.valid, job.test, job.parameters, rep.native_kernels, rep.blas});
        }
        job.model = trainer->model_ptr();
        // The run's curves, read back from its metrics (every line is fsync'ed as written; a
        // trained run's were read once, after its training).
        if (kept) lines = read_metrics_lines(to.metrics_path);
        job.eval_curve = metric_curve(lines, task == "lm" ? "eval_ppl" : "eval_token_acc");
        job.loss_curve = metric_curve(lines, "loss");
        const auto& e = job.test;
        const std::string quality =
            task == "lm" ? fmt::format("perplexity {:.3f}, bits/byte {:.4f}", std::exp(e.loss), e.bits_per_byte)
                         : fmt::format("token acc {:.1f}%, answer acc {:.1f}%{}", 100 * e.token_acc, 100 * e.answer_acc,
                                       e.chain_queries > 0 ? fmt::format(", chain acc {:.1f}%", 100 * e.chain_acc)
                                                           : std::string());
        const std::string curve =
            job.eval_curve.value.size() < 2
                ? std::string()
                : " " + (task == "lm"
                             ? sparkline(job.eval_curve.value,
                                         *std::min_element(job.eval_curve.value.begin(), job.eval_curve.value.end()),
                                         job.eval_curve.value.front())
                             : sparkline(job.eval_curve.value, 0, 1));
        log(fmt::format(
            "compare: {} on {}{}: {}{}, {:.0f}s{}, {} tok/s{}\n", spec, task,
            lr_sweep ? fmt::format(" at lr {:g}", c.lr) : std::string(), quality,
            lr_sweep ? fmt::format(" (valid token acc {:.1f}%)", 100 * job.valid.token_acc) : std::string(),
            job.result.seconds,
            job.result.stopped_early ? fmt::format(" (stop_at reached at step {})", job.result.step) : std::string(),
            format_rate(job.result.tokens_per_s), curve));
        if (auto sweep = o.sweep_lengths.find(task); sweep != o.sweep_lengths.end()) {
          job.sweep = length_sweep(*job.model, c.task, sweep->second, o.sweep_rows, c.eval_batch, rows_seed);
          // s5: the error of the whole product (last position); the others: token error.
          const bool s5 = task == "s5";
          std::string line =
              fmt::format("compare: {} on {}: {} by length:", spec, task, s5 ? "last-position error" : "token error");
          for (const auto& e : job.sweep)
            line += fmt::format(" {}:{:.1f}%", e.length, 100 * (s5 ? e.final_error : e.token_error));
          log(line + "\n");
        }
      } catch (const Error& e) {
        // A caller error this run alone hits (e.g. a mixer that rejects these settings): the
        // row says why and the other runs go on.
        job.error = e.what();
      } catch (...) {
        // Anything else is a mixlab bug (InternalError, a c10::Error from a kernel, bad_alloc):
        // stop handing out jobs and fail the whole command after the workers have joined.
        std::lock_guard<std::mutex> lock(log_mutex);
        if (!bug) bug = std::current_exception();
        next = n_jobs;
      }
    }
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (int64_t w = 0; w < workers; ++w) pool.emplace_back(work);
    for (auto& th : pool) th.join();
  }
  if (bug) std::rethrow_exception(bug);
  rep.jobs = workers;
  rep.runs = n_jobs;
  for (const auto& job : jobs) rep.runs_kept += job.kept, rep.runs_resumed += job.resumed;
  if (lr_sweep) rep.lrs = o.lrs;

  // Rows in mixer order. Decode speed and analysis are measured after training, one at a time,
  // so concurrent jobs do not disturb the decode timings.
  for (size_t m = 0; m < mixers.size(); ++m) {
    CompareRow row;
    row.mixer = mixers[m];
    try {
      std::shared_ptr<DecoderModel> decode_model;
      double rate_sum = 0;
      std::map<std::string, std::vector<double>> answer_seeds, loss_seeds, hop_sum;
      std::map<std::string, std::vector<int64_t>> hop_n;
      for (const auto& job : jobs)
        if (job.mixer == m) MIXLAB_CHECK(job.error.empty(), "{} on {}: {}", mixers[m], o.tasks[job.task], job.error);
      // The rate each task's cells report: with a sweep the best mean validation token accuracy
      // over seeds (ties: the lower loss; lm: the lower loss), else the one rate the runs used.
      for (size_t t = 0; t < o.tasks.size(); ++t) {
        const std::string& task = o.tasks[t];
        std::map<double, std::vector<const Job*>> by_lr;
        for (const auto& job : jobs)
          if (job.mixer == m && job.task == t) by_lr[job.lr].push_back(&job);
        const LrTrial* best = nullptr;
        std::vector<LrTrial> trials;
        for (const auto& [lr, runs] : by_lr) {
          LrTrial trial;
          trial.lr = lr;
          const double n = static_cast<double>(runs.size());
          for (const Job* j : runs) {
            trial.valid_token_acc += j->valid.token_acc / n, trial.valid_loss += j->valid.loss / n;
            trial.test_token_acc += j->test.token_acc / n, trial.test_loss += j->test.loss / n;
          }
          trials.push_back(trial);
        }
        for (const LrTrial& trial : trials) {
          const bool better = !best || (task == "lm" ? trial.valid_loss < best->valid_loss
                                                     : trial.valid_token_acc > best->valid_token_acc ||
                                                           (trial.valid_token_acc == best->valid_token_acc &&
                                                            trial.valid_loss < best->valid_loss));
          if (better) best = &trial;
        }
        MIXLAB_ASSERT(best != nullptr, "compare: no run of {} on {}", mixers[m], task);
        row.lr[task] = best->lr;
        if (lr_sweep) row.lr_trials[task] = trials;
      }
      for (const auto& job : jobs) {
        if (job.mixer != m) continue;
        const std::string& task = o.tasks[job.task];
        if (job.lr != row.lr.at(task)) continue;  // a rate the sweep did not choose
        const EvalResult& e = job.test;
        row.eval_curves[task].push_back(job.eval_curve);
        row.loss_curves[task].push_back(job.loss_curve);
        row.token_acc_seeds[task].push_back(e.token_acc);
        answer_seeds[task].push_back(e.answer_acc);
        loss_seeds[task].push_back(e.loss);
        if (task == "lm") {
          row.ppl_seeds[task].push_back(std::exp(e.loss));
          row.bpb_seeds[task].push_back(e.bits_per_byte);
          row.d_model = job.model->dims().d_model;
        }
        if (e.chain_queries > 0) row.chain_acc_seeds[task].push_back(e.chain_acc);
        if (!job.sweep.empty()) row.sweep[task].push_back(job.sweep);
        auto& hs = hop_sum[task];
        auto& hn = hop_n[task];
        if (hs.size() < e.hop_acc.size()) hs.resize(e.hop_acc.size(), 0.0), hn.resize(e.hop_acc.size(), 0);
        for (size_t k = 0; k < e.hop_acc.size(); ++k)
          if (e.hop_queries[k] > 0) hs[k] += e.hop_acc[k], ++hn[k];
        rate_sum += job.result.tokens_per_s / static_cast<double>(o.seeds);
        row.seconds += job.result.seconds;
        row.steps_planned[task] = job.config.steps;
        row.steps_trained[task].push_back(job.result.step);
        if (task == "lm" || row.ppl_seeds.empty()) row.parameters = job.parameters;  // lm's width is matched
        row.parameters_by_task[task] = job.parameters;
        if (job.model->dims().max_len >= T) decode_model = job.model;
      }
      for (const auto& t : o.tasks) {
        row.token_acc[t] = seed_stats(row.token_acc_seeds[t]).mean;
        row.answer_acc[t] = seed_stats(answer_seeds[t]).mean;
        row.eval_loss[t] = seed_stats(loss_seeds[t]).mean;
        if (row.chain_acc_seeds.count(t)) row.chain_acc[t] = seed_stats(row.chain_acc_seeds[t]).mean;
        if (!hop_sum[t].empty()) {
          auto& h = row.hop_acc[t];
          for (size_t k = 0; k < hop_sum[t].size(); ++k)
            h.push_back(hop_n[t][k] > 0 ? hop_sum[t][k] / static_cast<double>(hop_n[t][k]) : 0.0);
        }
      }
      row.train_tokens_per_s = rate_sum / static_cast<double>(o.tasks.size());
      // T is the longest task's sequence, and each model is sized for its own task.
      MIXLAB_ASSERT(decode_model != nullptr, "compare: no model of {} holds T = {}", mixers[m], T);
      row.decode_us_per_token = decode_us_per_token(*decode_model, T);
      fill_analysis(row, *decode_model, T);
      row.ran = true;
    } catch (const Error& e) {
      row.ran = false;
      row.note = fmt::format("failed: {}", e.what());
      if (o.progress) std::cerr << "compare: " << mixers[m] << ": " << row.note << "\n";
    }
    rep.rows.push_back(row);
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - t_all).count();
  return rep;
}

}  // namespace mixlab
