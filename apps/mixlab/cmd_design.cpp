// mixlab design — seed 000's design procedure as a command: from a budget (reads per token,
// decode cache, shortest path) at a length T to a recommended pattern, with the ranked table, the
// Pareto front and a picture. The search lives in the analysis area (mixlab/analysis/design.h).
//
//   mixlab design --T 4096 --max-time 16
//   mixlab design --T 65536 --max-time 24 --max-cache 64 --objective congestion --plot design.png
//   mixlab design --T 4096 --max-time 16 --top 3 --check copy,recall --steps 300   # + trained accuracies
// --check trains the top K candidates and the two named patterns of seed 000 Table 1 nearest the
// recommendation in time per token through `compare` (mixlab/train/compare.h, default preset),
// and prints their held-out token accuracy per task beside their metrics.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>

#include "commands.h"
#include "mixlab/analysis/design.h"
#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/tasks.h"

namespace mixlab::cli {
namespace {

struct DesignArgs {
  std::string T, max_time, max_cache, max_path, top = "10";
  std::string objective = "path";
  bool json = false;
  std::string plot;
  std::vector<std::string> also;
  std::string check;  // tasks, comma-separated
  std::string steps;
  std::string check_out = "runs/design-check";
};

std::vector<std::string> split_tasks(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    MIXLAB_CHECK(!item.empty(), "design: --check has an empty task in '{}'", s);
    const auto& known = task_names();
    MIXLAB_CHECK(std::find(known.begin(), known.end(), item) != known.end(),
                 "design: --check task '{}' does not exist; expected some of {}", item, fmt::join(known, ", "));
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Trains the top K and the two named patterns nearest the recommendation in time per token, and
// prints their accuracies per task next to their metrics.
void run_check(const DesignResult& r, const std::vector<std::string>& tasks, int64_t steps, const std::string& out) {
  std::vector<const DesignCandidate*> chosen;
  for (size_t k = 0; k < r.ranked.size() && static_cast<int64_t>(chosen.size()) < r.options.top; ++k)
    chosen.push_back(&r.candidates[r.ranked[k]]);
  const auto& rec = r.candidates[static_cast<size_t>(r.recommended)];
  if (std::find(chosen.begin(), chosen.end(), &rec) == chosen.end()) chosen.push_back(&rec);
  std::vector<const DesignCandidate*> named;
  for (const auto& c : r.candidates)
    if (c.named && c.recurrent) named.push_back(&c);  // screened ones too: pow2 above --max-time is a reference
  std::stable_sort(named.begin(), named.end(), [&](const DesignCandidate* a, const DesignCandidate* b) {
    return std::llabs(a->time_max - rec.time_max) < std::llabs(b->time_max - rec.time_max);
  });
  for (size_t k = 0; k < named.size() && k < 2; ++k)
    if (std::find(chosen.begin(), chosen.end(), named[k]) == chosen.end()) chosen.push_back(named[k]);
  CompareOptions o;
  o.tasks = tasks;
  for (const auto* c : chosen) o.mixers.push_back("resolvent:" + c->spec);
  o.out_dir = out;
  o.progress = false;
  if (steps > 0) o.overrides["steps"] = steps;
  std::cerr << fmt::format("design: --check trains {} mixers on {} through compare (out: {})\n", o.mixers.size(),
                           fmt::join(tasks, ","), out);
  const CompareReport rep = compare_run(o);
  std::map<std::string, const CompareRow*> row_of;
  for (const auto& row : rep.rows) row_of[row.mixer] = &row;
  std::cout << fmt::format("\nCheck: held-out token accuracy (%) after training (compare preset {}, {}):\n", rep.preset,
                           steps > 0 ? fmt::format("{} steps", steps) : std::string("preset steps"));
  std::string head = fmt::format("{:<32} {:>5} {:>6} {:>5}", "spec", "time", "cache", "path");
  for (const auto& t : tasks) head += fmt::format(" {:>8}", t);
  std::cout << head << "\n";
  for (const auto* c : chosen) {
    const std::string cache = c->measured ? std::to_string(c->cache_max) : std::string("—");
    const std::string path = !c->measured       ? std::string("—")
                             : c->path_infinite ? std::string("inf")
                                                : (c->path_exact ? "" : ">=") + std::to_string(c->path_max);
    std::string line = fmt::format("{:<32} {:>5} {:>6} {:>5}", c->spec + (c->named ? " (named)" : ""),
                                   (c->measured ? "" : ">=") + std::to_string(c->time_max), cache, path);
    const auto it = row_of.find("resolvent:" + c->spec);
    for (const auto& t : tasks) {
      std::string cell = "failed";
      if (it != row_of.end() && it->second->ran && it->second->token_acc.count(t))
        cell = fmt::format("{:.1f}", 100.0 * it->second->token_acc.at(t));
      line += fmt::format(" {:>8}", cell);
    }
    std::cout << line << "\n";
  }
}

void run_design(const DesignArgs& a) {
  // Every argument is checked before the search starts.
  DesignOptions o;
  MIXLAB_CHECK(!a.T.empty(), "design: --T is required (the sequence length to design for)");
  o.T = parse_int(a.T, "design: --T", 2, kAnalysisMaxT);
  auto limit = [](const std::string& text, const char* flag) {
    return text.empty() ? int64_t{-1} : parse_positive_int(text, fmt::format("design: {}", flag), kAnalysisMaxT);
  };
  o.max_time = limit(a.max_time, "--max-time");
  o.max_cache = limit(a.max_cache, "--max-cache");
  o.max_path = limit(a.max_path, "--max-path");
  o.top = parse_positive_int(a.top, "design: --top", 1000000);
  o.objective = design_objective_parse(a.objective);
  o.extra_specs = a.also;
  const std::vector<std::string> check = a.check.empty() ? std::vector<std::string>{} : split_tasks(a.check);
  const int64_t steps = a.steps.empty() ? 0 : parse_positive_int(a.steps, "design: --steps", 100000000);
  MIXLAB_CHECK(a.steps.empty() || !check.empty(), "design: --steps applies to --check; give --check TASKS too");
  MIXLAB_CHECK(check.empty() || !a.json, "design: --check prints a text table; use it without --json");
  if (!a.plot.empty()) {
    const bool png = a.plot.size() > 4 && a.plot.compare(a.plot.size() - 4, 4, ".png") == 0;
    MIXLAB_CHECK(png, "design: --plot must name a .png file, got '{}'", a.plot);
  }
  const DesignResult r = design_search(o);
  if (a.json) {
    std::cout << design_json(r).dump(2) << "\n";
  } else {
    std::cout << design_text(r);
  }
  if (!a.plot.empty()) {
    design_plot(r, a.plot);
    std::cerr << "design: wrote " << a.plot << "\n";
  }
  if (!check.empty()) run_check(r, check, steps, a.check_out);
}

}  // namespace

void cmd_design_register(CLI::App& app) {
  auto args = std::make_shared<DesignArgs>();
  auto* cmd = app.add_subcommand(
      "design",
      "Search the pattern families (docs/DESIGN.md) for the patterns that fit a budget at length T: ranked table, "
      "Pareto front over (time, cache, path), and a recommendation with its `mixlab train` line.");
  cmd->add_option("--T", args->T,
                  "Sequence length to design for (2 to 1048576); every limit holds at every position < T")
      ->required();
  cmd->add_option("--max-time", args->max_time, "Most past positions read per token, max over positions");
  cmd->add_option("--max-cache", args->max_cache, "Most positions kept in the decode cache after a step");
  cmd->add_option("--max-path", args->max_path, "Longest shortest path allowed between any two positions");
  cmd->add_option("--objective", args->objective,
                  "Rank by path (shortest max path), congestion (copy-task congestion) or cost (time per token); "
                  "default path");
  cmd->add_option("--top", args->top, "Rows of the ranked table (default 10)");
  cmd->add_flag("--json", args->json, "Print JSON: every candidate within the budget, the front, the recommendation");
  cmd->add_option("--plot", args->plot,
                  "Draw every candidate (time against path, cache as colour), the front and the named patterns to "
                  "FILE.png");
  cmd->add_option("--also", args->also, "A pattern spec to measure besides the grid (repeatable)");
  cmd->add_option("--check", args->check,
                  "Train the top K (--top) and the two nearest named patterns on these tasks through compare, e.g. "
                  "copy,recall, and print their accuracies");
  cmd->add_option("--steps", args->steps, "Training steps per --check run (default: compare's default preset)");
  cmd->add_option("--check-out", args->check_out, "Output directory of the --check runs (default runs/design-check)");
  cmd->callback([args] { run_design(*args); });
}

}  // namespace mixlab::cli
