// `mixlab plot`: training curves of any runs, one line per run, from their metrics.jsonl.
//
//   mixlab plot runs/train/copy-attention runs/train/copy-local_8 --metric eval_acc --out copy.png
//   mixlab plot runs/train/lm-*/ --metric ppl --x tokens --log-y --out lm.png
//
// RUN is a run folder (its metrics.jsonl) or a metrics.jsonl file. Metrics (the keys `mixlab
// train` writes, mixlab/train/trainer.cpp):
//   loss, acc, ppl                 training lines (every log_every steps; the mean of the window)
//   eval_loss, eval_acc, eval_ppl  held-out lines (every eval_every steps and at the end);
//                                  eval_acc is the answer accuracy (token accuracy for lm)
// x: step, tokens (trained so far) or seconds (training wall time); tokens and seconds are in the
// metrics of runs made since 2026-11-27 (an older run is refused for them, named).
// A line that is not JSON (a run killed mid-write leaves a torn last line) is skipped and named
// on stderr; what is complete is drawn. A run without any point of the metric is an error naming
// it, as is a RUN without metrics.jsonl. Each line is labelled by its run folder's name.
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixlab/analysis/line_chart.h"
#include "mixlab/core/error.h"
#include "mixlab/train/run_metrics.h"

namespace mixlab::cli {
namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::vector<std::string> runs;
  std::string metric = "loss", x = "step", out, title;
  bool log_y = false;
};

// The metrics.jsonl key of a metric name (lm: eval_acc is token accuracy).
std::string metric_key(const std::string& metric, bool lm) {
  if (metric == "eval_acc") return lm ? "eval_token_acc" : "eval_answer_acc";
  return metric;
}

LineSeries read_run(const std::string& run, const PlotArgs& a) {
  std::error_code ec;
  const fs::path path = fs::is_directory(run, ec) ? fs::path(run) / "metrics.jsonl" : fs::path(run);
  MIXLAB_CHECK(fs::is_regular_file(path, ec),
               "plot: run '{}' has no metrics.jsonl (expected a folder of `mixlab train` "
               "or a metrics.jsonl file)",
               run);
  const fs::path folder = fs::is_directory(run, ec) ? fs::path(run) : path.parent_path();
  LineSeries s;
  s.label = fs::weakly_canonical(folder, ec).filename().string();
  if (s.label.empty()) s.label = folder.string();
  const std::vector<nlohmann::json> lines = read_metrics_lines(path.string(), [&](int64_t number) {
    std::cerr << fmt::format(
        "mixlab plot: {}: line {} is not a complete JSON object (a run killed mid-write?): skipped\n", path.string(),
        number);
  });
  // lm runs write ppl; eval_acc then means token accuracy.
  bool lm = false;
  for (const auto& j : lines) lm |= j.contains("ppl") || j.contains("eval_ppl");
  const std::string key = metric_key(a.metric, lm);
  // x of each training line by step: held-out lines carry no tokens/seconds and are placed at
  // those of the training line of their step (or the last one before it).
  std::map<int64_t, double> x_at_step;
  if (a.x != "step") {
    for (const auto& j : lines)
      if (j.contains("step") && j["step"].is_number_integer() && j.contains(a.x) && j[a.x].is_number())
        x_at_step[j["step"].get<int64_t>()] = j[a.x].get<double>();
    MIXLAB_CHECK(!x_at_step.empty(),
                 "plot: run '{}' has no '{}' in its metrics (written by mixlab train since 2026-11-27); use --x step",
                 run, a.x);
  }
  for (const auto& j : lines) {
    if (!j.contains(key) || !j[key].is_number() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    double x = static_cast<double>(step);
    if (a.x != "step") {
      auto it = x_at_step.upper_bound(step);
      if (it == x_at_step.begin()) continue;  // before the first training line
      x = std::prev(it)->second;
    }
    s.x.push_back(x);
    s.y.push_back(j[key].get<double>());
  }
  MIXLAB_CHECK(!s.x.empty(),
               "plot: run '{}' has no '{}' point in {} (metrics: loss, acc, ppl for training lines; "
               "eval_loss, eval_acc, eval_ppl for held-out lines{})",
               run, a.metric, path.string(), a.metric.rfind("ppl") != std::string::npos ? "; ppl is lm's" : "");
  return s;
}

void run_plot(const PlotArgs& a) {
  static const std::vector<std::string> metrics = {"loss", "acc", "ppl", "eval_loss", "eval_acc", "eval_ppl"};
  MIXLAB_CHECK(std::find(metrics.begin(), metrics.end(), a.metric) != metrics.end(),
               "plot: --metric must be one of {}, got '{}'", fmt::join(metrics, ", "), a.metric);
  MIXLAB_CHECK(a.x == "step" || a.x == "tokens" || a.x == "seconds",
               "plot: --x must be step, tokens or seconds, got '{}'", a.x);
  LineChart c;
  for (const auto& run : a.runs) c.series.push_back(read_run(run, a));
  c.title = a.title.empty() ? fmt::format("{} against {}", a.metric, a.x) : a.title;
  c.x_label = a.x == "step" ? "step" : a.x == "tokens" ? "tokens trained" : "training wall time (s)";
  c.y_label = a.metric;
  c.log_y = a.log_y;
  line_chart_png(c, a.out);
  std::cout << fmt::format("plot: {} run(s), {} against {} -> {}\n", c.series.size(), a.metric, a.x, a.out);
}

}  // namespace

void cmd_plot_register(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand("plot", "Draw training curves of runs (their metrics.jsonl), one line per run");
  cmd->add_option("runs", a->runs, "Run folders of `mixlab train` (or metrics.jsonl files)")->required();
  cmd->add_option("--metric", a->metric, "loss | acc | ppl | eval_loss | eval_acc | eval_ppl (default loss)");
  cmd->add_option("--x", a->x, "step | tokens | seconds (default step)");
  cmd->add_option("--out", a->out, "PNG file to write")->required();
  cmd->add_option("--title", a->title, "Chart title (default: '<metric> against <x>')");
  cmd->add_flag("--log-y", a->log_y, "Logarithmic y axis");
  cmd->callback([a] { run_plot(*a); });
}

}  // namespace mixlab::cli
