// `mixlab compare` reporting: the printed table, compare.csv, compare.json and the chart
// (mixlab/train/compare_report.h).
#include "mixlab/train/compare_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "mixlab/analysis/chart.h"
#include "mixlab/analysis/format.h"
#include "mixlab/analysis/line_chart.h"
#include "mixlab/analysis/scatter_chart.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/core/error.h"

namespace mixlab {

using json = nlohmann::json;

namespace {

// A table in columns separated by " | " under a rule; columns from `right_from` on are
// right-aligned. A row of another length than `head` (a failed mixer's note) is written as is.
std::string text_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& cells,
                       size_t right_from) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = display_width(head[i]);
  for (const auto& c : cells)
    if (c.size() == head.size())
      for (size_t i = 0; i < c.size(); ++i) w[i] = std::max(w[i], display_width(c[i]));
  std::string out;
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (size_t i = 0; i < c.size(); ++i) {
      if (i) s += " | ";
      s += (c.size() == head.size()) ? pad_to_width(c[i], w[i], i >= right_from) : c[i];
    }
    out += s + "\n";
  };
  line(head);
  std::string rule;
  for (size_t i = 0; i < head.size(); ++i) rule += (i ? "-|-" : "") + std::string(w[i], '-');
  out += rule + "\n";
  for (const auto& c : cells) line(c);
  return out;
}

// "97.3" for one seed, "97.3 (96.1..98.0)" for several: mean (min..max), in %.
std::string seed_cell(const std::vector<double>& v) {
  const SeedStats s = seed_stats(v);
  if (v.size() <= 1) return fmt::format("{:.1f}", 100 * s.mean);
  return fmt::format("{:.1f} ({:.1f}..{:.1f})", 100 * s.mean, 100 * s.lo, 100 * s.hi);
}

// A value (not a fraction) with `digits` decimals, mean (min..max) over several seeds.
std::string value_cell(const std::vector<double>& v, int digits) {
  const SeedStats s = seed_stats(v);
  if (v.size() <= 1) return fmt::format("{:.{}f}", s.mean, digits);
  return fmt::format("{:.{}f} ({:.{}f}..{:.{}f})", s.mean, digits, s.lo, digits, s.hi, digits);
}

// compare.json's "lr_sweep" of a row: task -> every rate tried with its validation figures and
// the test figures beside them.
json lr_trials_json(const CompareRow& r) {
  json out = json::object();
  for (const auto& [task, trials] : r.lr_trials) {
    json list = json::array();
    for (const auto& t : trials)
      list.push_back({{"lr", t.lr},
                      {"valid_token_acc", t.valid_token_acc},
                      {"valid_loss", t.valid_loss},
                      {"test_token_acc", t.test_token_acc},
                      {"test_loss", t.test_loss}});
    out[task] = list;
  }
  return out;
}

// compare.json's "sweep" of a row: task -> one array per seed of {length, rows, token_error,
// answer_error, final_error}.
json sweep_json(const CompareRow& r) {
  json out = json::object();
  for (const auto& [task, seeds] : r.sweep) {
    json per_seed = json::array();
    for (const auto& s : seeds) {
      json points = json::array();
      for (const auto& e : s)
        points.push_back({{"length", e.length},
                          {"rows", e.rows},
                          {"token_error", e.token_error},
                          {"answer_error", e.answer_error},
                          {"final_error", e.final_error}});
      per_seed.push_back(points);
    }
    out[task] = per_seed;
  }
  return out;
}

// The error the table and chart show: s5's final error (the state after all L permutations, as in
// seed 004 Fig. 3; its token error averages the easy early prefixes in), else the token error.
double LengthError::*sweep_metric(const std::string& task) {
  return task == "s5" ? &LengthError::final_error : &LengthError::token_error;
}
std::string sweep_metric_name(const std::string& task) {
  return task == "s5" ? "error at the last position" : "token error";
}

// Mean error at each sweep length over a row's seeds (the sweeps share their lengths).
std::vector<std::pair<int64_t, double>> sweep_mean(const std::vector<std::vector<LengthError>>& seeds,
                                                   const std::string& task) {
  std::vector<std::pair<int64_t, double>> out;
  if (seeds.empty()) return out;
  const auto metric = sweep_metric(task);
  for (size_t i = 0; i < seeds.front().size(); ++i) {
    double sum = 0;
    for (const auto& s : seeds) sum += s.at(i).*metric;
    out.emplace_back(seeds.front()[i].length, sum / static_cast<double>(seeds.size()));
  }
  return out;
}

// Per task with a length sweep: the mean token error over the lengths up to the trained length
// and beyond it, and the worst length (the full curves are in by_length.csv / .png).
std::string sweep_table_text(const CompareReport& rep) {
  std::string out;
  for (const auto& task : rep.tasks) {
    bool any = false;
    for (const auto& r : rep.rows) any = any || (r.ran && r.sweep.count(task));
    if (!any) continue;
    const int64_t trained = rep.trained_length.count(task) ? rep.trained_length.at(task) : 0;
    out += fmt::format("\n{}: {} (%) by length, mean over seeds; trained on lengths <= {}\n", task,
                       sweep_metric_name(task), trained);
    out += fmt::format("{:<28} | {:>16} | {:>16} | {:>18}\n", "mixer", "lengths <= " + std::to_string(trained),
                       "lengths > " + std::to_string(trained), "worst (length)");
    for (const auto& r : rep.rows) {
      if (!r.ran || !r.sweep.count(task)) continue;
      double in_sum = 0, out_sum = 0, worst = -1;
      int64_t in_n = 0, out_n = 0, worst_at = 0;
      for (const auto& [L, err] : sweep_mean(r.sweep.at(task), task)) {
        (L <= trained ? in_sum : out_sum) += err;
        ++(L <= trained ? in_n : out_n);
        if (err > worst) worst = err, worst_at = L;
      }
      auto cell = [](double sum, int64_t n) { return n ? fmt::format("{:.1f}", 100 * sum / n) : std::string("—"); };
      out += fmt::format("{:<28} | {:>16} | {:>16} | {:>18}\n", r.mixer, cell(in_sum, in_n), cell(out_sum, out_n),
                         fmt::format("{:.1f} ({})", 100 * worst, worst_at));
    }
  }
  return out;
}

// Whether the table shows a task's learning rate: with a sweep, or when the rows differ (a preset
// with a rate per mixer, compare_preset_lr).
bool show_lr(const CompareReport& rep, const std::string& task) {
  if (!rep.lrs.empty()) return true;
  double first = 0;
  for (const auto& r : rep.rows) {
    if (!r.ran || !r.lr.count(task)) continue;
    if (first == 0) first = r.lr.at(task);
    if (r.lr.at(task) != first) return true;
  }
  return false;
}

// Whether the table shows a task's steps: when the rows planned different budgets or some run
// stopped early (stop_at).
bool show_steps(const CompareReport& rep, const std::string& task) {
  int64_t first = -1;
  for (const auto& r : rep.rows) {
    if (!r.ran || !r.steps_planned.count(task)) continue;
    if (first < 0) first = r.steps_planned.at(task);
    if (r.steps_planned.at(task) != first) return true;
    for (int64_t s : r.steps_trained.at(task))
      if (s != first) return true;
  }
  return false;
}

// "5000", or "2250/5000" when the runs stopped early (the mean over seeds of the steps trained).
std::string steps_cell(const CompareRow& r, const std::string& task) {
  if (!r.steps_planned.count(task)) return "—";
  const int64_t planned = r.steps_planned.at(task);
  double trained = 0;
  for (int64_t s : r.steps_trained.at(task)) trained += static_cast<double>(s);
  trained /= static_cast<double>(std::max<size_t>(1, r.steps_trained.at(task).size()));
  if (std::llround(trained) == planned) return std::to_string(planned);
  return fmt::format("{}/{}", std::llround(trained), planned);
}

// Mean over seeds at every step some seed evaluated (a seed that stopped early drops out after
// its last step), and the seeds' range as a band when there are several.
LineSeries seed_band(const std::string& label, const std::vector<MetricCurve>& seeds, double scale) {
  std::map<int64_t, std::vector<double>> at;
  for (const auto& c : seeds)
    for (size_t i = 0; i < c.step.size(); ++i) at[c.step[i]].push_back(scale * c.value[i]);
  LineSeries line;
  line.label = label;
  for (const auto& [step, v] : at) {
    const SeedStats st = seed_stats(v);
    line.x.push_back(static_cast<double>(step));
    line.y.push_back(st.mean);
    if (seeds.size() > 1) line.lo.push_back(st.lo), line.hi.push_back(st.hi);
  }
  return line;
}

// The held-out curves as text: one sparkline per (task, mixer), the mean over seeds at each
// evaluation; accuracy on 0..100 %, perplexity from the task's lowest to its highest value.
std::string sparkline_text(const CompareReport& rep) {
  std::string out;
  for (const auto& task : rep.tasks) {
    std::vector<std::pair<std::string, LineSeries>> lines;
    double lo = 0, hi = 100;
    const bool lm = task == "lm";
    bool curves = false;
    for (const auto& r : rep.rows) {
      if (!r.ran || !r.eval_curves.count(task)) continue;
      LineSeries line = seed_band(r.mixer, r.eval_curves.at(task), lm ? 1.0 : 100.0);
      curves = curves || line.y.size() >= 2;
      lines.emplace_back(r.mixer, std::move(line));
    }
    if (!curves) continue;
    if (lm) {
      lo = 1e300, hi = -1e300;
      for (const auto& [m, l] : lines)
        for (double v : l.y) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    out += fmt::format("\n{}: held-out {} at each evaluation ({}; curves_{}.png draws them with the training loss)\n",
                       task, lm ? "perplexity" : "token accuracy",
                       lm ? fmt::format("{:.2f}..{:.2f}", lo, hi) : std::string("0..100 %"), task);
    size_t w = 0;
    for (const auto& [m, l] : lines) w = std::max(w, display_width(m));
    for (const auto& [m, l] : lines) {
      if (l.y.empty()) continue;
      out += fmt::format("  {} {} {:.{}f} -> {:.{}f}\n", pad_to_width(m, w, false), sparkline(l.y, lo, hi, 32),
                         l.y.front(), lm ? 2 : 1, l.y.back(), lm ? 2 : 1);
    }
  }
  return out;
}

std::vector<std::string> accuracy_tasks(const CompareReport& rep) {
  std::vector<std::string> out;
  for (const auto& t : rep.tasks)
    if (t != "lm") out.push_back(t);
  return out;
}

// Runs that trained their whole plan on a plateau: held-out accuracy never more than kPlateauRise
// above the median of its evaluations, never more than that below it after the first evaluation,
// and under kPlateauCeiling at the end. The median, not the first evaluation: a run that rises a
// few points right away and then stays flat (the main job's ssm: 7.2, then 13.8 % on recall) is on
// a plateau too, while a run that leaves one late has its late evaluations far above its median,
// and one that climbed for half its plan before it flattened (brl:hist=32 on MAD's fuzzy recall:
// 28.5 % at step 2000, 43-48 % from step 8000) its early ones far below. On MQAR-style tasks such a
// plateau can break late, at a step that moves with the seed and the last bits of rounding
// (docs/log/results-2026-11.md: on the main job's recall at lr 1e-3, pow2+cache leaves it at steps
// 4250 and 2750 with seeds 1 and 2 and not by step 5000 with seed 0), so a cell at chance after a
// short plan says "not within these steps", not "cannot". Named per task: mixer (steps; k of n
// seeds when not all).
constexpr double kPlateauRise = 0.05, kPlateauCeiling = 0.5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string plateau_text(const CompareReport& rep) {
  std::string out;
  for (const auto& task : accuracy_tasks(rep)) {
    std::vector<std::string> names;
    for (const auto& r : rep.rows) {
      if (!r.ran || !r.eval_curves.count(task) || !r.steps_planned.count(task)) continue;
      const auto& curves = r.eval_curves.at(task);
      const auto& trained = r.steps_trained.at(task);
      size_t flat = 0;
      for (size_t s = 0; s < curves.size(); ++s) {
        const auto& v = curves[s].value;
        if (v.size() < 2 || s >= trained.size() || trained[s] != r.steps_planned.at(task)) continue;
        const double mid = median(v);
        if (*std::max_element(v.begin(), v.end()) - mid < kPlateauRise &&
            mid - *std::min_element(v.begin() + 1, v.end()) < kPlateauRise && v.back() < kPlateauCeiling)
          ++flat;
      }
      if (flat == 0) continue;
      names.push_back(fmt::format("{} ({} steps{})", r.mixer, r.steps_planned.at(task),
                                  flat == curves.size() ? "" : fmt::format("; {} of {} seeds", flat, curves.size())));
    }
    if (!names.empty()) out += fmt::format("  {}: {}\n", task, fmt::join(names, ", "));
  }
  if (out.empty()) return out;
  return fmt::format(
      "\nOn a plateau for the whole plan (held-out accuracy within {:.0f} points of the median of its evaluations "
      "from the\nsecond evaluation on, never more above it, under {:.0f} % at the end):\n{}A plateau is not a limit: "
      "where it breaks can move with the seed "
      "and with rounding "
      "(docs/RESULTS.md);\nmore steps (--steps) or seeds (--seeds) show whether it does.\n",
      100 * kPlateauRise, 100 * kPlateauCeiling, out);
}

}  // namespace

std::string compare_table_text(const CompareReport& rep) {
  std::vector<std::string> head = {"mixer", "structure", "cost", "time/tok", "cache", "path", "congestion"};
  // Multihop also gets the accuracy on its chained queries (those that follow >= 1 link): the
  // part of the task that plain recall does not measure.
  const bool chains = std::find(rep.tasks.begin(), rep.tasks.end(), "multihop") != rep.tasks.end();
  const bool lm = std::find(rep.tasks.begin(), rep.tasks.end(), "lm") != rep.tasks.end();
  for (const auto& t : rep.tasks) {
    if (t == "lm") {
      head.insert(head.end(), {"lm ppl", "lm bits/byte", "params"});
    } else {
      head.push_back(t + " %");
    }
    if (show_lr(rep, t)) head.push_back(t + " lr");
    if (show_steps(rep, t)) head.push_back(t + " steps");
  }
  if (chains) head.push_back("chains %");
  head.insert(head.end(), {"train tok/s", "decode µs/tok"});
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rep.rows) {
    std::vector<std::string> c = {r.mixer};
    if (!r.ran) {
      c.push_back(r.note);
      cells.push_back(c);
      continue;
    }
    c.push_back(r.structure);
    c.push_back(r.cost_class);
    c.push_back(r.cost_max >= 0 ? std::to_string(r.cost_max) : "—");
    c.push_back(r.cache_max >= 0 ? std::to_string(r.cache_max) : "—");
    c.push_back(r.shortest);
    c.push_back(r.congestion);
    for (const auto& t : rep.tasks) {
      if (t == "lm") {
        c.push_back(value_cell(r.ppl_seeds.at(t), 2));
        c.push_back(value_cell(r.bpb_seeds.at(t), 3));
        c.push_back(fmt::format("{} (d={})", r.parameters, r.d_model));
      } else {
        c.push_back(seed_cell(r.token_acc_seeds.at(t)));
      }
      if (show_lr(rep, t)) c.push_back(r.lr.count(t) ? fmt::format("{:g}", r.lr.at(t)) : "—");
      if (show_steps(rep, t)) c.push_back(steps_cell(r, t));
    }
    if (chains) c.push_back(r.chain_acc_seeds.count("multihop") ? seed_cell(r.chain_acc_seeds.at("multihop")) : "—");
    c.push_back(format_rate(r.train_tokens_per_s));
    c.push_back(fmt::format("{:.0f}", r.decode_us_per_token));
    cells.push_back(c);
  }
  std::string out = text_table(head, cells, 3);
  int64_t T = 0;
  for (const auto& r : rep.rows) T = std::max(T, r.analysis_T);
  out += fmt::format(
      "time/tok = max past positions read per token, cache = max positions kept, path = max shortest path,\n"
      "congestion = copy routing bounds — all measured by the analysis at T = {} (0-based rows). Accuracy = held-out\n"
      "token accuracy on scored positions{}{}. Preset '{}', {:.0f} s in total, {} run(s) at a time{}.\n"
      "Native kernels: {}; BLAS: {}.\n",
      T, chains ? "; chains = multihop queries whose answer follows >= 1 link" : "",
      rep.seeds > 1 ? fmt::format("; mean (min..max) over {} seeds", rep.seeds) : "", rep.preset, rep.seconds, rep.jobs,
      rep.runs_kept + rep.runs_resumed > 0
          ? fmt::format(" ({} of {} runs kept from an earlier compare, {} resumed from a checkpoint; the total is "
                        "this command's time, each run's seconds and rate its own training's)",
                        rep.runs_kept, rep.runs, rep.runs_resumed)
          : std::string(),
      rep.native_kernels.empty() ? "unknown" : rep.native_kernels, rep.blas.empty() ? "unknown" : rep.blas);
  // Tasks trained at different widths (table1's copy tier needs d_model 128): say which.
  std::map<int64_t, std::vector<std::string>> by_width;
  for (const auto& task : rep.tasks)
    if (rep.d_model_by_task.count(task)) by_width[rep.d_model_by_task.at(task)].push_back(task);
  if (by_width.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [d, tasks] : by_width) parts.push_back(fmt::format("{} d_model {}", fmt::join(tasks, ", "), d));
    out += fmt::format("Model width by task: {}.\n", fmt::join(parts, "; "));
  }
  if (std::any_of(rep.rows.begin(), rep.rows.end(), [](const CompareRow& r) { return r.per_layer; })) {
    out +=
        "hybrid rows (a per-layer mixer list): structure, cost, path and congestion per item of the list as "
        "written;\n"
        "time/tok and cache are the worst layer's.\n";
  }
  // Families that are not a pattern: what their analysis columns are (Mixer::cost_figures).
  for (const auto& r : rep.rows)
    if (!r.analysis_basis.empty()) out += fmt::format("{}: {}.\n", r.mixer, r.analysis_basis);
  if (lm) {
    out +=
        "lm: perplexity and bits per byte of the Brown valid stream (sliding window, mixlab/train/lm_eval.h); params "
        "=\n"
        "model parameters at the matched width d (compare.h).\n";
  }
  if (!rep.lrs.empty())
    out += fmt::format(
        "lr = the learning rate each cell reports, chosen per mixer and task from {} by the mean validation token\n"
        "accuracy over seeds (lm: the lowest validation loss); the cells are the test split's{}.\n",
        fmt::join(rep.lrs, ", "), lm ? " (lm: the test stream, not the valid one)" : "");
  else if (std::any_of(rep.tasks.begin(), rep.tasks.end(), [&](const std::string& t) { return show_lr(rep, t); }))
    out += fmt::format("lr = the preset's learning rate for this mixer and task (compare_presets.cpp says why).\n");
  if (std::any_of(rep.tasks.begin(), rep.tasks.end(), [&](const std::string& t) { return show_steps(rep, t); }))
    out +=
        "steps = steps trained / planned (mean over seeds): a run ends early when its validation accuracy reaches\n"
        "stop_at; a preset may plan fewer steps for a mixer whose result is settled (compare_presets.cpp says why).\n";
  out += sweep_table_text(rep);
  out += sparkline_text(rep);
  out += plateau_text(rep);
  return out;
}

std::string compare_plan_text(const CompareReport& rep, const std::string& out_dir, bool resume) {
  std::vector<std::vector<std::string>> cells;
  int64_t planned = 0, left = 0, trained = 0, replaced = 0, unmeasured = 0;
  double seconds_left = 0;
  for (size_t i = 0; i < rep.plan.size(); ++i) {
    const ComparePlannedRun& p = rep.plan[i];
    std::string state = "train";
    if (p.state == ComparePlannedRun::State::kKept)
      state = "kept";
    else if (p.state == ComparePlannedRun::State::kResume)
      state = fmt::format("resume at step {}", p.step);
    else if (p.replaces)
      state = "train (replaces an earlier run's files)";
    if (!p.adopted_from.empty())
      state += fmt::format(" ({} renamed)", std::filesystem::path(p.adopted_from).filename().string());
    planned += p.steps;
    left += p.state == ComparePlannedRun::State::kKept ? 0 : p.steps - p.step;
    trained += p.state == ComparePlannedRun::State::kTrain;
    replaced += p.replaces;
    cells.push_back({std::to_string(i + 1), p.mixer, p.task, state, std::to_string(p.seed), fmt::format("{:g}", p.lr),
                     fmt::format("{} / {}", p.step, p.steps),
                     p.seconds_left < 0 ? "—" : format_duration(p.seconds_left)});
    if (p.seconds_left > 0) seconds_left += p.seconds_left;
    if (p.seconds_left < 0) ++unmeasured;
  }
  std::string out =
      text_table({"run", "mixer", "task", "state", "seed", "lr", "steps done / planned", "time left"}, cells, 4);
  for (size_t i = 0; i < rep.plan.size(); ++i)
    if (!rep.plan[i].not_taken.empty()) out += fmt::format("run {}: {}\n", i + 1, rep.plan[i].not_taken);
  out += fmt::format("compare --plan: {} run(s) into {}/runs", rep.runs, out_dir);
  if (resume)
    out += fmt::format(" with --resume: {} kept, {} resumed from a checkpoint, {} trained from the start",
                       rep.runs_kept, rep.runs_resumed, trained);
  else
    out += fmt::format(
        ", each trained from the start{}",
        replaced > 0
            ? fmt::format(" (an earlier compare's files under {} of these names go first; --resume keeps them)",
                          replaced)
            : std::string());
  out += fmt::format("; {} of {} planned steps left ({:.0f} %; a run that reaches stop_at ends sooner).\n", left,
                     planned, planned > 0 ? 100.0 * double(left) / double(planned) : 0.0);
  if (unmeasured < static_cast<int64_t>(rep.plan.size()))
    out += fmt::format(
        "time left = an estimate from the tokens/s that each mixer's runs in this directory measured: about {} of run "
        "time,\none run at a time{}.\n",
        format_duration(seconds_left),
        unmeasured > 0 ? fmt::format(", not counting {} run(s) whose mixer has no measured rate here", unmeasured)
                       : std::string());
  return out;
}

namespace {

// Accuracy per task, one cluster of bars per mixer that ran.
void write_chart(const CompareReport& rep, const std::string& path) {
  BarChart chart;
  chart.title = fmt::format("Held-out token accuracy per task (preset '{}')", rep.preset);
  chart.series = accuracy_tasks(rep);
  for (const auto& r : rep.rows) {
    if (!r.ran) continue;
    BarGroup g;
    g.label = r.mixer;
    for (const auto& t : chart.series) {
      g.values.push_back(r.token_acc.at(t));
      const SeedStats st = seed_stats(r.token_acc_seeds.at(t));
      g.ranges.emplace_back(st.lo, st.hi);  // a whisker from the worst to the best seed
    }
    chart.groups.push_back(std::move(g));
  }
  bar_chart_png(chart, path);
}

// lm: valid perplexity against the analysis' time per token (seed 000 Fig. 3 analog).
void write_lm_chart(const CompareReport& rep, const std::string& path) {
  ScatterChart chart;
  chart.title = fmt::format("Brown valid perplexity against per-token cost (preset '{}')", rep.preset);
  int64_t T = 0;
  for (const auto& r : rep.rows) T = std::max(T, r.analysis_T);
  chart.x_label = fmt::format("time/token: past positions read per token at T = {} (log scale)", T);
  chart.y_label = "valid perplexity (bytes)";
  chart.log_x = true;
  for (const auto& r : rep.rows) {
    if (!r.ran || r.cost_max < 1 || !r.ppl_seeds.count("lm")) continue;
    const SeedStats s = seed_stats(r.ppl_seeds.at("lm"));
    chart.points.push_back({r.mixer, static_cast<double>(r.cost_max), s.mean, s.lo, s.hi});
  }
  scatter_chart_png(chart, path);
}

// by_length.csv: every (mixer, task, seed, length) of the length sweeps.
std::string sweep_csv(const CompareReport& rep) {
  std::string csv = "mixer,task,seed,length,rows,token_error,answer_error,final_error\n";
  for (const auto& r : rep.rows)
    for (const auto& [task, seeds] : r.sweep)
      for (size_t s = 0; s < seeds.size(); ++s)
        for (const auto& e : seeds[s])
          csv += fmt::format("\"{}\",{},{},{},{},{:.6f},{:.6f},{:.6f}\n", r.mixer, task, s, e.length, e.rows,
                             e.token_error, e.answer_error, e.final_error);
  return csv;
}

// by_length_<task>.png: token error against length, one line per mixer (seed 004 Fig. 3 / 4).
void write_sweep_chart(const CompareReport& rep, const std::string& task, const std::string& path) {
  LineChart chart;
  chart.title =
      fmt::format("{}: {} against length (trained on lengths <= {}; preset '{}')", task, sweep_metric_name(task),
                  rep.trained_length.count(task) ? rep.trained_length.at(task) : 0, rep.preset);
  chart.x_label = "sequence length";
  chart.y_label = sweep_metric_name(task) + " (%)";
  for (const auto& r : rep.rows) {
    if (!r.ran || !r.sweep.count(task)) continue;
    LineSeries line;
    line.label = r.mixer;
    for (const auto& [L, err] : sweep_mean(r.sweep.at(task), task)) {
      line.x.push_back(static_cast<double>(L));
      line.y.push_back(100 * err);
    }
    chart.series.push_back(std::move(line));
  }
  if (!chart.series.empty()) line_chart_png(chart, path);
}

// curves_<task>.png: the held-out figure at each evaluation above, the training loss below, one
// line per mixer (mean over seeds, their range as a band).
void write_curves_chart(const CompareReport& rep, const std::string& task, const std::string& path) {
  const bool lm = task == "lm";
  const std::string seeds = rep.seeds > 1 ? fmt::format("; mean over {} seeds, band = min..max", rep.seeds) : "";
  LineChart held_out, loss;
  held_out.title = fmt::format("{}: held-out {} against step (preset '{}'{})", task,
                               lm ? "perplexity" : "token accuracy", rep.preset, seeds);
  held_out.x_label = loss.x_label = "training step";
  held_out.y_label = lm ? "valid perplexity" : "held-out token accuracy (%)";
  held_out.log_y = lm;
  loss.title = fmt::format("{}: training loss against step (mean of each logging window)", task);
  loss.y_label = "training loss (nats per scored token)";
  for (const auto& r : rep.rows) {
    if (!r.ran || !r.eval_curves.count(task)) continue;
    held_out.series.push_back(seed_band(r.mixer, r.eval_curves.at(task), lm ? 1.0 : 100.0));
    loss.series.push_back(seed_band(r.mixer, r.loss_curves.at(task), 1.0));
  }
  auto points = [](const LineChart& c) {
    size_t n = 0;
    for (const auto& s : c.series) n += s.x.size();
    return n;
  };
  if (points(held_out) == 0 || points(loss) == 0) return;  // nothing logged (log_every beyond steps)
  line_charts_png({held_out, loss}, path);
}

}  // namespace

void compare_write(const CompareReport& rep, const std::string& dir) {
  std::filesystem::create_directories(dir);
  json rows = json::array();
  std::string csv =
      "mixer,ran,note,structure,pattern,cost_class,analysis_T,time_per_token,cache,shortest_path,"
      "congestion";
  for (const auto& t : rep.tasks)
    csv += "," + t + "_eval_token_acc," + t + "_answer_acc," + t + "_chain_acc," + t + "_eval_token_acc_min," + t +
           "_eval_token_acc_max," + t + "_chain_acc_min," + t + "_chain_acc_max";
  const bool lm = std::find(rep.tasks.begin(), rep.tasks.end(), "lm") != rep.tasks.end();
  csv += ",train_tokens_per_s,decode_us_per_token,parameters,train_seconds";
  csv += lm ? ",lm_ppl,lm_ppl_min,lm_ppl_max,lm_bits_per_byte,d_model" : "";
  for (const auto& t : rep.tasks) csv += "," + t + "_lr";
  csv += ",analysis_basis\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const auto& r : rep.rows) {
    json j = {{"mixer", r.mixer},
              {"ran", r.ran},
              {"note", r.note},
              {"structure", r.structure},
              {"pattern", r.pattern},
              {"cost_class", r.cost_class},
              {"analysis_T", r.analysis_T},
              {"time_per_token", r.cost_max},
              {"cache", r.cache_max},
              {"shortest_path", r.shortest},
              {"congestion", r.congestion},
              {"analysis_basis", r.analysis_basis},
              {"analysis_per_layer", r.per_layer},
              {"eval_token_acc", r.token_acc},
              {"answer_acc", r.answer_acc},
              {"eval_loss", r.eval_loss},
              {"chain_acc", r.chain_acc},
              {"ppl_seeds", r.ppl_seeds},
              {"bits_per_byte_seeds", r.bpb_seeds},
              {"d_model", r.d_model},
              {"seeds", rep.seeds},
              {"eval_token_acc_seeds", r.token_acc_seeds},
              {"chain_acc_seeds", r.chain_acc_seeds},
              {"hop_acc", r.hop_acc},
              {"sweep", sweep_json(r)},
              {"lr", r.lr},
              {"steps_planned", r.steps_planned},
              {"steps_trained", r.steps_trained},
              {"lr_sweep", lr_trials_json(r)},
              {"train_tokens_per_s", r.train_tokens_per_s},
              {"decode_us_per_token", r.decode_us_per_token},
              {"parameters", r.parameters},
              {"parameters_by_task", r.parameters_by_task},
              {"train_seconds", r.seconds}};
    rows.push_back(j);
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{}", quote(r.mixer), r.ran ? 1 : 0, quote(r.note),
                       quote(r.structure), quote(r.pattern), quote(r.cost_class), r.analysis_T, r.cost_max, r.cache_max,
                       quote(r.shortest), quote(r.congestion));
    for (const auto& t : rep.tasks) {
      const bool has = r.token_acc.count(t) > 0;
      csv += has ? fmt::format(",{:.6f},{:.6f},", r.token_acc.at(t), r.answer_acc.at(t)) : std::string(",,,");
      if (r.chain_acc.count(t)) csv += fmt::format("{:.6f}", r.chain_acc.at(t));
      for (const auto* m : {&r.token_acc_seeds, &r.chain_acc_seeds}) {
        if (m->count(t) && !m->at(t).empty()) {
          const SeedStats st = seed_stats(m->at(t));
          csv += fmt::format(",{:.6f},{:.6f}", st.lo, st.hi);
        } else {
          csv += ",,";
        }
      }
    }
    csv +=
        fmt::format(",{:.1f},{:.2f},{},{:.2f}", r.train_tokens_per_s, r.decode_us_per_token, r.parameters, r.seconds);
    if (lm && r.ppl_seeds.count("lm")) {
      const SeedStats p = seed_stats(r.ppl_seeds.at("lm")), b = seed_stats(r.bpb_seeds.at("lm"));
      csv += fmt::format(",{:.4f},{:.4f},{:.4f},{:.5f},{}", p.mean, p.lo, p.hi, b.mean, r.d_model);
    } else if (lm) {
      csv += ",,,,,";
    }
    for (const auto& t : rep.tasks) csv += r.lr.count(t) ? fmt::format(",{:g}", r.lr.at(t)) : std::string(",");
    csv += "," + quote(r.analysis_basis) + "\n";
  }
  const json doc = {{"preset", rep.preset},
                    {"tasks", rep.tasks},
                    {"seconds", rep.seconds},
                    {"jobs", rep.jobs},
                    {"runs", rep.runs},
                    {"runs_kept", rep.runs_kept},
                    {"runs_resumed", rep.runs_resumed},
                    {"seeds", rep.seeds},
                    {"lrs", rep.lrs},
                    {"native_kernels", rep.native_kernels},
                    {"blas", rep.blas},
                    {"config", rep.config_example},
                    {"d_model_by_task", rep.d_model_by_task},
                    {"rows", rows}};
  atomic_write_file(dir + "/compare.json", doc.dump(2) + "\n");  // checked, fsync'ed, renamed
  atomic_write_file(dir + "/compare.csv", csv);
  bool sweeps = false;
  for (const auto& r : rep.rows) sweeps = sweeps || !r.sweep.empty();
  if (sweeps) {
    atomic_write_file(dir + "/by_length.csv", sweep_csv(rep));
    for (const auto& t : rep.tasks) write_sweep_chart(rep, t, dir + "/by_length_" + t + ".png");
  }
  if (!accuracy_tasks(rep).empty()) write_chart(rep, dir + "/compare.png");
  for (const auto& t : rep.tasks) write_curves_chart(rep, t, dir + "/curves_" + t + ".png");
  if (std::find(rep.tasks.begin(), rep.tasks.end(), "lm") != rep.tasks.end())
    write_lm_chart(rep, dir + "/compare_lm.png");
}

}  // namespace mixlab
