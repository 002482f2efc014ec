// mixlab design — seed 000's design procedure as a command: from a budget (reads per token,
// decode cache, shortest path) at a length T to a recommended pattern, with the ranked table, the
// Pareto front and a picture. The search lives in the analysis area (mixlab/analysis/design.h).
//
//   mixlab design --T 4096 --max-time 16
//   mixlab design --T 65536 --max-time 24 --max-cache 64 --objective congestion --plot design.png
#include <iostream>
#include <memory>

#include "commands.h"
#include "mixlab/analysis/design.h"
#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"

namespace mixlab::cli {
namespace {

struct DesignArgs {
  std::string T, max_time, max_cache, max_path, top = "10";
  std::string objective = "path";
  bool json = false;
  std::string plot;
  std::vector<std::string> also;
};

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
  cmd->callback([args] { run_design(*args); });
}

}  // namespace mixlab::cli
