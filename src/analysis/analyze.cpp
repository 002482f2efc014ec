// One analysis report per (pattern, T), its JSON and text forms (see mixlab/analysis/analyze.h).
#include "mixlab/analysis/analyze.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mixlab/analysis/congestion.h"
#include "mixlab/analysis/format.h"
#include "mixlab/core/error.h"
#include "row_source.h"

namespace mixlab {
namespace {

int64_t ceil_half_plus(int64_t d) { return (d + 2) / 2; }  // ceil((d + 1) / 2), Prop. 4.7

// Estimated edge visits of one pass over all commodities on the 2n-node window graph: each
// commodity scans the rows of its window, about n rows of mean width w.
double window_work(const std::vector<int64_t>& sizes_2n, int64_t n) {
  double nnz = 0;
  for (int64_t v : sizes_2n) nnz += static_cast<double>(v);
  return static_cast<double>(n) * nnz / 2.0;
}

void fill_congestion(const Pattern& given, int64_t T, const AnalyzeOptions& opt, CongestionReport& c) {
  c.n = T / 2;
  const int64_t n = c.n;
  if (n < 1) {
    c.lower_bound_source = "n/a (T < 2)";
    c.heuristic_status = "n/a (T < 2)";
    c.exact_status = "n/a (T < 2)";
    return;
  }
  // Rows equal for every position < 2n, so every bound and routing below is the same.
  const Pattern p = analysis_equivalent_pattern(given, 2 * n);
  auto sizes = analysis_row_sizes(p, 2 * n);
  const double work = window_work(sizes, n);
  Routing start;  // heuristic start, built only when the heuristic runs
  bool have_start = false;

  if (p.translation_invariant()) {
    auto d = analysis_distance_by_difference(p, n + 1);
    if (d[n] == kUnreachable) {
      c.d_min = c.prop47 = c.lower_bound = c.shifted = kAnalysisInf;
      c.lower_bound_source = "no path i -> i + n";
      c.heuristic_status = c.exact_status = "n/a (no routing exists)";
      return;
    }
    c.d_min = d[n];  // d(i, i + n) = d(n) for every i
    c.prop47 = c.lower_bound = ceil_half_plus(c.d_min);
    c.lower_bound_source = "Prop. 4.7 with exact d";
    c.shifted = congestion_shifted_value(p, n);
  } else if (work <= static_cast<double>(opt.max_graph_work)) {
    start = congestion_shortest_routing(p, n);
    have_start = true;
    // The paths are shortest, so their lengths are the d(i, i + n).
    int64_t dmin = std::numeric_limits<int64_t>::max(), visits = 0;
    for (const auto& path : start.paths) {
      dmin = std::min<int64_t>(dmin, static_cast<int64_t>(path.size()) - 1);
      visits += static_cast<int64_t>(path.size());
    }
    c.d_min = dmin;
    c.prop47 = c.lower_bound = ceil_half_plus(dmin);
    c.lower_bound_source = "Prop. 4.7 with exact d";
    // Every routing makes at least Σ (d_i + 1) visits spread over 2n nodes.
    int64_t counting = (visits + 2 * n - 1) / (2 * n);
    if (counting > c.lower_bound) {
      c.lower_bound = counting;
      c.lower_bound_source = "ceil(sum_i (d(i, i+n) + 1) / 2n), the counting of Prop. 4.7 per path";
    }
    c.shortest = routing_congestion(start);
  } else {
    // Every edge jumps back at most J positions, so d(i, i + n) >= ceil(n / J).
    analysis_detail::RowSource rows(p, 2 * n);
    int64_t J = 1;
    for (int64_t v = 1; v < 2 * n; ++v) {
      const int64_t oldest = rows.oldest(v);  // O(log K): enumerating rows here was O(T^2)
      if (oldest >= 0) J = std::max(J, v - oldest);
    }
    c.prop47 = c.lower_bound = ceil_half_plus((n + J - 1) / J);
    c.lower_bound_source = fmt::format("Prop. 4.7 with d >= ceil(n / max jump {})", J);
    c.heuristic_status = "skipped (graph work above max_graph_work)";
    c.exact_status = opt.exact_congestion ? "skipped (graph work above max_graph_work)" : "not run";
    return;
  }

  auto upper = c.upper_bound();
  if (!p.recurrent()) {
    c.heuristic_status = "not needed (single-edge paths: the routing is forced)";
  } else if (upper == c.lower_bound) {
    c.heuristic_status = "not needed (upper bound = lower bound)";
  } else if (n > opt.heuristic_max_n) {
    c.heuristic_status = fmt::format("skipped (n > heuristic_max_n = {})", opt.heuristic_max_n);
  } else if (work * std::max(1, opt.heuristic_passes) > static_cast<double>(opt.max_graph_work)) {
    c.heuristic_status = "skipped (work above max_graph_work)";
  } else {
    if (!have_start) start = congestion_shifted_routing(p, n);
    Routing best = congestion_heuristic(p, start, opt.heuristic_passes, c.lower_bound);
    c.heuristic = routing_congestion(best);
    MIXLAB_ASSERT(c.heuristic <= upper, "heuristic {} worse than its start {}", c.heuristic, upper);
    c.heuristic_status = "done";
    upper = c.upper_bound();
  }

  if (!opt.exact_congestion) {
    c.exact_status = "not run";
  } else if (upper == c.lower_bound) {
    c.exact = upper;
    c.exact_status = "optimal (upper bound = lower bound)";
  } else if (!p.recurrent()) {
    c.exact = upper;
    c.exact_status = "optimal (the routing is forced)";
  } else if (n > opt.exact_max_n) {
    c.exact_status = fmt::format("not run (n > exact_max_n = {})", opt.exact_max_n);
  } else {
    auto ex = congestion_exact_ilp(p, n, c.lower_bound, upper, opt.exact_time_limit_s);
    c.exact = ex.value;
    c.exact_status = ex.status;
  }
}

nlohmann::json int_json(int64_t v) {
  if (v == kAnalysisInf) return "inf";
  if (v == kAnalysisNone) return nullptr;
  return v;
}

}  // namespace

int64_t CongestionReport::upper_bound() const {
  int64_t best = kAnalysisNone;
  for (int64_t v : {shifted, shortest, heuristic, exact}) {
    if (v == kAnalysisInf) return kAnalysisInf;
    if (v >= 0 && (best < 0 || v < best)) best = v;
  }
  return best;
}

PatternReport analyze_pattern(const Pattern& p, int64_t T, const AnalyzeOptions& opt) {
  analysis_check_T("analyze_pattern", T);
  MIXLAB_CHECK(opt.exact_max_n >= 1 && opt.exact_max_n <= 64,
               "analyze_pattern: options.exact_max_n must be in [1, 64], got {}", opt.exact_max_n);
  MIXLAB_CHECK(opt.exact_time_limit_s > 0, "analyze_pattern: options.exact_time_limit_s must be > 0, got {}",
               opt.exact_time_limit_s);
  MIXLAB_CHECK(opt.heuristic_max_n >= 0, "analyze_pattern: options.heuristic_max_n must be >= 0, got {}",
               opt.heuristic_max_n);
  MIXLAB_CHECK(opt.heuristic_passes >= 0, "analyze_pattern: options.heuristic_passes must be >= 0, got {}",
               opt.heuristic_passes);
  MIXLAB_CHECK(opt.max_graph_work > 0, "analyze_pattern: options.max_graph_work must be > 0, got {}",
               opt.max_graph_work);
  PatternReport r;
  r.spec = p.spec();
  r.structure = p.structure_name();
  r.time_class = p.time_class();
  r.cache_class = p.cache_class();
  r.T = T;
  r.recurrent = p.recurrent();
  r.translation_invariant = p.translation_invariant();

  auto sizes = analysis_row_sizes(p, T);
  r.cost_max = *std::max_element(sizes.begin(), sizes.end());
  r.cost_mean = static_cast<double>(std::accumulate(sizes.begin(), sizes.end(), int64_t{0})) / static_cast<double>(T);
  auto cache = analysis_cache_sizes(p, T);
  r.cache_max = *std::max_element(cache.begin(), cache.end());
  r.cache_mean = static_cast<double>(std::accumulate(cache.begin(), cache.end(), int64_t{0})) / static_cast<double>(T);
  r.shortest_path = analysis_shortest_path(p, T, opt.max_graph_work);
  fill_congestion(p, T, opt, r.congestion);
  return r;
}

std::vector<std::string> analysis_table1_specs() {
  return {"causal", "band:8", "order:1", "order:8", "dense", "pow2", "pow2+cache", "square", "square+cache"};
}

nlohmann::json analysis_report_json(const PatternReport& r) {
  nlohmann::json j;
  j["spec"] = r.spec;
  j["structure"] = r.structure;
  j["T"] = r.T;
  j["positions"] = "0-based";
  j["recurrent"] = r.recurrent;
  j["translation_invariant"] = r.translation_invariant;
  j["time_per_token"] = {{"class", r.time_class},
                         {"past_reads_max", r.cost_max},
                         {"past_reads_mean", r.cost_mean},
                         {"A_row_max", r.cost_max + 1},
                         {"A_row_mean", r.cost_mean + 1.0}};
  j["cache"] = {{"class", r.cache_class}, {"max", r.cache_max}, {"mean", r.cache_mean}};
  const auto& s = r.shortest_path;
  j["shortest_path"] = {{"max", s.infinite ? nlohmann::json("inf") : nlohmann::json(s.max)},
                        {"mean", s.infinite ? nlohmann::json("inf") : nlohmann::json(s.mean)},
                        {"max_reachable", s.max},
                        {"mean_reachable", s.mean},
                        {"unreachable_pairs", s.unreachable_pairs},
                        {"pairs", s.pairs},
                        {"exact", s.exact},
                        {"sources", s.sources},
                        {"method", s.method}};
  const auto& c = r.congestion;
  j["congestion"] = {{"n", c.n},
                     {"d_min", int_json(c.d_min)},
                     {"prop47_bound", int_json(c.prop47)},
                     {"lower_bound", int_json(c.lower_bound)},
                     {"lower_bound_source", c.lower_bound_source},
                     {"shifted", int_json(c.shifted)},
                     {"shortest_path_routing", int_json(c.shortest)},
                     {"heuristic", int_json(c.heuristic)},
                     {"heuristic_status", c.heuristic_status},
                     {"exact", int_json(c.exact)},
                     {"exact_status", c.exact_status},
                     {"upper_bound", int_json(c.upper_bound())}};
  return j;
}

namespace {

std::string sp_mean_cell(const ShortestPathStats& s) {
  if (s.infinite) return "∞";
  return (s.exact ? "" : "~") + fmt::format("{:.2f}", s.mean);
}
std::string route_cell(const CongestionReport& c) {
  if (c.shifted != kAnalysisNone) return format_bound(c.shifted);
  if (c.shortest != kAnalysisNone) return format_bound(c.shortest) + "s";
  return "—";
}
std::string heur_cell(const CongestionReport& c) {
  if (c.heuristic != kAnalysisNone) return format_bound(c.heuristic);
  if (c.heuristic_status.rfind("skipped", 0) == 0) return "skip";
  return "—";
}
std::string exact_cell(const CongestionReport& c) {
  if (c.exact == kAnalysisNone) return c.exact_status.rfind("not run (n >", 0) == 0 ? "n>max" : "—";
  return format_bound(c.exact) + (c.exact_status.rfind("optimal", 0) == 0 ? "" : "*");
}

}  // namespace

std::string analysis_report_text(const PatternReport& r) {
  const auto& s = r.shortest_path;
  const auto& c = r.congestion;
  std::string out;
  out += fmt::format("pattern        {}  ({})\n", r.spec, r.structure);
  out += fmt::format("T              {}  (positions 0-based; {})\n", r.T,
                     r.recurrent ? "recurrent: B = P(i)" : "non-recurrent: B = 0, A = P(i) + diagonal");
  out += fmt::format("time / token   |P(i)| max {}, mean {:.2f}  (A row: +1)  paper: {}\n", r.cost_max, r.cost_mean,
                     r.time_class);
  out += fmt::format("cache          max {}, mean {:.2f} positions kept after a step  paper: {}\n", r.cache_max,
                     r.cache_mean, r.cache_class);
  out += fmt::format("shortest path  max {}, mean {}  ({}{}", format_shortest_path(s), sp_mean_cell(s), s.method,
                     s.exact ? ", all pairs" : fmt::format(", {} of {} sources: max is a lower bound", s.sources, r.T));
  if (s.infinite)
    out += fmt::format("; {} of {} pairs unreachable; reachable max {}, mean {:.2f}", s.unreachable_pairs, s.pairs,
                       s.max, s.mean);
  out += ")\n";
  out += fmt::format("congestion     copy task on 2n nodes, n = {}\n", c.n);
  out += fmt::format("  d_min        {}\n", format_bound(c.d_min));
  out += fmt::format("  Prop. 4.7    {}  (ceil((d_min + 1) / 2))\n", format_bound(c.prop47));
  out += fmt::format("  lower bound  {}  ({})\n", format_bound(c.lower_bound), c.lower_bound_source);
  if (c.shifted != kAnalysisNone)
    out += fmt::format("  shifted      {}  (Prop. 4.8 routing)\n", format_bound(c.shifted));
  if (c.shortest != kAnalysisNone)
    out += fmt::format("  shortest     {}  (shortest-path routing)\n", format_bound(c.shortest));
  out += fmt::format("  heuristic    {}  ({})\n", format_bound(c.heuristic), c.heuristic_status);
  out += fmt::format("  exact        {}  ({})\n", format_bound(c.exact), c.exact_status);
  return out;
}

std::string analysis_table_text(const std::vector<PatternReport>& reports) {
  std::string out;
  if (reports.empty()) return out;
  const auto& first = reports.front();
  out += fmt::format("Seed 000 Table 1 (left half) measured at T = {}, positions 0-based; copy task n = {}.\n", first.T,
                     first.congestion.n);
  // Widths add up to 110 columns for T up to 65536 (wider numbers push the row out, never cut it).
  constexpr const char* kRow = "{:<21} {:<12} {:<9} {:>6} {:>7} {:<9} {:>6} {:>4} {:>7} {:>3} {:>5} {:>4} {:>5}\n";
  // Group titles start over their columns (35, 60, 76, 90).
  out += fmt::format("{:<35}{:<25}{:<16}{:<14}{}\n", "", "time per token |P(i)|", "cache size", "shortest path",
                     fmt::format("congestion (n={})", first.congestion.n));
  out += fmt::format(kRow, "structure", "spec", "paper", "max", "mean", "paper", "max", "max", "mean", "lb", "route",
                     "heur", "exact");
  for (const auto& r : reports) {
    std::string name = r.structure;
    if (r.spec.size() > 6 && r.spec.compare(r.spec.size() - 6, 6, "+cache") == 0) name = "  + cache-efficient";
    if (auto paren = name.find(" ("); paren != std::string::npos) name = name.substr(0, paren);  // spec has the width
    if (name.size() > 21) name = name.substr(0, 21);
    const auto& c = r.congestion;
    out += fmt::format(kRow, name, r.spec, r.time_class, r.cost_max, fmt::format("{:.1f}", r.cost_mean), r.cache_class,
                       r.cache_max, format_shortest_path(r.shortest_path), sp_mean_cell(r.shortest_path),
                       format_bound(c.lower_bound), route_cell(c), heur_cell(c), exact_cell(c));
  }
  out +=
      "time: past positions read per token (the A row reads one more). cache: positions kept after a step.\n"
      "shortest path over all pairs j < i; '≥' and '~': from evenly spaced sources only (graph too large);\n"
      "∞: some pair unreachable (B = 0 beyond the window). congestion: lb = ceil((d+1)/2) (Prop. 4.7) or\n"
      "its counting argument per path when larger (non translation-invariant patterns);\n"
      "route = shifted routing (Prop. 4.8), 's' = shortest-path routing; heur = rip-up-and-reroute ('—': not\n"
      "needed, bounds meet or paths forced; skip: n or work above the cap); exact = integer program ('—': not\n"
      "run, '*': not proven optimal, n>max: n above --exact-max-n).\n";
  return out;
}

}  // namespace mixlab
