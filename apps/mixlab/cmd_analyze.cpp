// mixlab analyze — exact cost / cache / shortest path / congestion of a pattern at a length T,
// or the left half of seed 000 Table 1 for every built-in pattern (--all). See
// include/mixlab/analysis/analyze.h for what each column means.
#include <iostream>
#include <memory>

#include "commands.h"
#include "mixlab/analysis/analyze.h"
#include "mixlab/core/error.h"

namespace mixlab::cli {
namespace {

struct AnalyzeArgs {
  std::string pattern;
  bool all = false;
  int64_t T = 1024;
  bool json = false;
  bool exact = false;
  std::string plot;
  AnalyzeOptions opt;
};

void run_analyze(const AnalyzeArgs& a) {
  MIXLAB_CHECK(a.all != !a.pattern.empty(), "analyze: give exactly one of --pattern SPEC or --all");
  MIXLAB_CHECK(a.T >= 1 && a.T <= kAnalysisMaxT, "analyze: --T must be in [1, {}], got {}", kAnalysisMaxT, a.T);
  MIXLAB_CHECK(a.plot.empty() || !a.all, "analyze: --plot draws one pattern; use it with --pattern, not --all");
  AnalyzeOptions opt = a.opt;
  opt.exact_congestion = a.exact;
  std::vector<std::string> specs = a.all ? analysis_table1_specs() : std::vector<std::string>{a.pattern};
  std::vector<Pattern> patterns;
  for (const auto& s : specs) patterns.push_back(Pattern::parse(s));  // bad specs fail before any work
  if (!a.plot.empty()) analysis_plot(patterns.front(), a.T, a.plot);  // T limit checked there
  std::vector<PatternReport> reports;
  for (const auto& p : patterns) reports.push_back(analyze_pattern(p, a.T, opt));
  if (a.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : reports) j.push_back(analysis_report_json(r));
    std::cout << (a.all ? j : j[0]).dump(2) << "\n";
  } else if (a.all) {
    std::cout << analysis_table_text(reports);
  } else {
    std::cout << analysis_report_text(reports.front());
  }
  if (!a.plot.empty()) std::cerr << "analyze: wrote " << a.plot << "\n";
}

}  // namespace

void cmd_analyze_register(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand(
      "analyze",
      "Measure a pattern exactly at length T: time per token |P(i)|, decode cache, shortest path and copy-task "
      "congestion (seed 000 Table 1, left half). Positions are 0-based.");
  auto* pattern = cmd->add_option("--pattern", args->pattern,
                                  "Pattern spec: causal, band:W, dense, order:K, pow2, square, linear, "
                                  "offsets:1,2,..., geom:B, power:P, fib, ruler:L, a union A+B (e.g. band:8+pow2), "
                                  "optionally +cache");
  auto* all = cmd->add_flag("--all", args->all,
                            "Table 1 rows for every built-in pattern (causal, band:8, order:1, order:8, dense, pow2, "
                            "pow2+cache, square, square+cache)");
  pattern->excludes(all);
  cmd->add_option("--T", args->T, "Sequence length (default 1024, also for --all; at most 1048576)");
  cmd->add_flag("--json", args->json, "Print JSON instead of text (an array of reports with --all)");
  cmd->add_flag("--exact-congestion", args->exact,
                "Solve the congestion integer program (GLPK) when n = T/2 <= --exact-max-n");
  cmd->add_option("--exact-max-n", args->opt.exact_max_n, "Largest n for the integer program (default 32, max 64)");
  cmd->add_option("--exact-time-limit", args->opt.exact_time_limit_s,
                  "Seconds per integer program before reporting 'not proven optimal' (default 30)");
  cmd->add_option("--heuristic-max-n", args->opt.heuristic_max_n,
                  "Skip the rip-up-and-reroute heuristic beyond this n (default 2048)");
  cmd->add_option("--plot", args->plot,
                  "Draw the A and B sparsity pictures (seed 000 Fig. 2) to FILE.png or FILE.svg (T <= 256)");
  cmd->callback([args] { run_analyze(*args); });
}

}  // namespace mixlab::cli
