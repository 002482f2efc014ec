// The pattern design search (see mixlab/analysis/design.h): grid, measurement, budget, ranking,
// Pareto front, recommendation and its text/JSON forms. The plot lives in design_plot.cpp.
#include "mixlab/analysis/design.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "mixlab/analysis/analyze.h"
#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {
namespace {

// Parameter grids (docs/DESIGN.md): widths for band/order and for the local part of unions,
// bases for geom, exponents for power, lengths for ruler.
const std::vector<int64_t> kWidths = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
const std::vector<int64_t> kUnionWidths = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
const std::vector<double> kBases = {1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5, 1.6, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 5, 6, 8};
const std::vector<double> kExponents = {1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4};
const std::vector<int64_t> kRulerLengths = {8, 16, 32, 64, 128, 256};
const std::vector<double> kUnionBases = {1.25, 1.5, 1.75, 2, 3, 4};

// The named spelling of a family member: geom:2 is pow2, power:2 is square.
std::string geom_spec(double b) { return b == 2.0 ? std::string("pow2") : fmt::format("geom:{}", b); }
std::string power_spec(double p) { return p == 2.0 ? std::string("square") : fmt::format("power:{}", p); }

std::string family_of(const Pattern& p) {
  switch (p.kind()) {
    case PatternKind::kBand:
      return "band";
    case PatternKind::kOrder:
      return "order";
    case PatternKind::kGeom:
    case PatternKind::kPow2:
      return "geom";
    case PatternKind::kPower:
    case PatternKind::kSquare:
    case PatternKind::kLinear:
      return "power";
    case PatternKind::kFib:
      return "fib";
    case PatternKind::kRuler:
      return "ruler";
    case PatternKind::kUnion:
      return "union";
    case PatternKind::kOffsets:
      return "offsets";
    case PatternKind::kCausal:
    case PatternKind::kDense:
      return "dense";
  }
  return "?";
}

constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 4;
constexpr int64_t kDesignExactT = 256;  // graph searches are all-pairs up to this T, whatever graph_work says

int64_t path_key(const DesignCandidate& c) { return c.path_infinite ? kBig : c.path_max; }
int64_t congestion_key(const DesignCandidate& c) {
  if (c.congestion_exact >= 0) return c.congestion_exact;
  if (c.congestion_upper >= 0) return c.congestion_upper;
  return c.congestion_lower >= 0 ? c.congestion_lower : kBig;
}

// The ranking key of an objective; ties fall through to the other metrics and the spec.
auto rank_key(const DesignCandidate& c, DesignObjective o) {
  switch (o) {
    case DesignObjective::kPath:
      return std::make_tuple(path_key(c), c.path_mean, c.time_max, c.cache_max, c.time_mean);
    case DesignObjective::kCongestion:
      return std::make_tuple(congestion_key(c), static_cast<double>(path_key(c)), c.time_max, c.cache_max, c.time_mean);
    case DesignObjective::kCost:
      break;
  }
  return std::make_tuple(c.time_max, c.time_mean, c.cache_max, path_key(c), c.path_mean);
}

struct Limit {
  const char* flag;
  int64_t value;
  int64_t (*metric)(const DesignCandidate&);
  const char* name;
};

int64_t metric_time(const DesignCandidate& c) { return c.time_max; }
int64_t metric_cache(const DesignCandidate& c) { return c.cache_max; }
int64_t metric_path(const DesignCandidate& c) { return path_key(c); }

std::vector<Limit> limits_of(const DesignOptions& o) {
  std::vector<Limit> out;
  if (o.max_time >= 0) out.push_back({"--max-time", o.max_time, metric_time, "time"});
  if (o.max_cache >= 0) out.push_back({"--max-cache", o.max_cache, metric_cache, "cache"});
  if (o.max_path >= 0) out.push_back({"--max-path", o.max_path, metric_path, "path"});
  return out;
}

bool meets(const DesignCandidate& c, const Limit& l) {
  if (!c.measured) return false;                                     // screened out: unknown
  if (std::string(l.name) == "path" && !c.path_exact) return false;  // a lower bound proves nothing
  return l.metric(c) <= l.value;
}

std::string metric_text(const DesignCandidate& c, const Limit& l) {
  if (std::string(l.name) == "path") {
    if (c.path_infinite) return "path ∞";
    return fmt::format("path {}{}", c.path_exact ? "" : "≥", c.path_max);
  }
  return fmt::format("{} {}", l.name, l.metric(c));
}

std::string path_cell(const DesignCandidate& c) {
  if (c.path_infinite) return "∞";
  return (c.path_exact ? "" : "≥") + std::to_string(c.path_max);
}

std::string candidate_summary(const DesignCandidate& c) {
  if (!c.measured) return fmt::format("{} (time >= {}, not measured)", c.spec, c.time_max);
  return fmt::format("{} (time {}, cache {}, path {})", c.spec, c.time_max, c.cache_max, path_cell(c));
}

// The error when nothing fits: which limit excludes everything, and the candidate closest to it.
[[noreturn]] void fail_nothing_fits(const DesignOptions& o, const std::vector<DesignCandidate>& cands) {
  const auto limits = limits_of(o);
  std::string all;
  for (const auto& l : limits) all += fmt::format("{}{} {}", all.empty() ? "" : ", ", l.flag, l.value);
  // The closest candidate to limit l among `pool`: least metric, then cheapest.
  auto closest = [&](const Limit& l, const std::vector<const DesignCandidate*>& pool) {
    const DesignCandidate* best = nullptr;
    for (const auto* c : pool)
      if ((c->measured || std::string(l.name) == "time") &&  // a screened candidate knows only its time
          (!best || std::make_tuple(l.metric(*c), c->time_max, c->cache_max) <
                        std::make_tuple(l.metric(*best), best->time_max, best->cache_max)))
        best = c;
    return best;
  };
  std::vector<const DesignCandidate*> every;
  for (const auto& c : cands) every.push_back(&c);
  // (1) One limit alone excludes every candidate. Candidates screened out by --max-time were not
  // measured, so only the time limit can be judged alone when there are any.
  const bool all_measured =
      std::all_of(cands.begin(), cands.end(), [](const DesignCandidate& c) { return c.measured; });
  for (const auto& l : limits) {
    if (!all_measured && std::string(l.name) != "time") continue;
    if (std::any_of(cands.begin(), cands.end(), [&](const DesignCandidate& c) { return meets(c, l); })) continue;
    const auto* c = closest(l, every);
    MIXLAB_FAIL(
        "design: nothing fits at T = {}: {} {} excludes all {} distinct candidates; the closest, and cheapest among "
        "the closest, is {}, which misses it with {}",
        o.T, l.flag, l.value, cands.size(), candidate_summary(*c), metric_text(*c, l));
  }
  // (2) The limits together: the limit whose relaxation admits a candidate with the least excess.
  const Limit* best_l = nullptr;
  const DesignCandidate* best_c = nullptr;
  double best_ratio = 0;
  for (const auto& l : limits) {
    std::vector<const DesignCandidate*> others;
    for (const auto& c : cands) {
      bool ok = true;
      for (const auto& m : limits)
        if (&m != &l && !meets(c, m)) ok = false;
      if (ok) others.push_back(&c);
    }
    if (others.empty()) continue;
    const auto* c = closest(l, others);
    const double ratio = static_cast<double>(l.metric(*c)) / static_cast<double>(std::max<int64_t>(l.value, 1));
    if (!best_l || ratio < best_ratio) best_l = &l, best_c = c, best_ratio = ratio;
  }
  if (best_l) {
    MIXLAB_FAIL(
        "design: nothing fits at T = {}: no candidate meets {} together; {} {} excludes every candidate that meets "
        "the other limits; the closest of those, and cheapest among the closest, is {}, which misses it with {}",
        o.T, all, best_l->flag, best_l->value, candidate_summary(*best_c), metric_text(*best_c, *best_l));
  }
  MIXLAB_FAIL("design: nothing fits at T = {}: no candidate meets {} together, nor any two of them", o.T, all);
}

void check_options(const DesignOptions& o) {
  MIXLAB_CHECK(o.T >= 2 && o.T <= kAnalysisMaxT, "design: --T must be in [2, {}], got {}", kAnalysisMaxT, o.T);
  auto limit = [](const char* flag, int64_t v) {
    MIXLAB_CHECK(v == -1 || v >= 1, "design: {} must be a positive integer, got {}", flag, v);
  };
  limit("--max-time", o.max_time);
  limit("--max-cache", o.max_cache);
  limit("--max-path", o.max_path);
  MIXLAB_CHECK(o.top >= 1, "design: --top must be >= 1, got {}", o.top);
  MIXLAB_CHECK(o.graph_work >= 1, "design: graph_work must be >= 1, got {}", o.graph_work);
  MIXLAB_CHECK(o.exact_max_n >= 0 && o.exact_max_n <= 64, "design: exact_max_n must be in [0, 64], got {}",
               o.exact_max_n);
  MIXLAB_CHECK(o.exact_time_limit_s > 0, "design: exact_time_limit_s must be > 0, got {}", o.exact_time_limit_s);
}

}  // namespace

DesignObjective design_objective_parse(const std::string& text) {
  if (text == "path") return DesignObjective::kPath;
  if (text == "congestion") return DesignObjective::kCongestion;
  if (text == "cost") return DesignObjective::kCost;
  MIXLAB_FAIL("design: --objective must be one of path, congestion, cost, got '{}'", text);
}

const char* design_objective_name(DesignObjective o) {
  switch (o) {
    case DesignObjective::kPath:
      return "path";
    case DesignObjective::kCongestion:
      return "congestion";
    case DesignObjective::kCost:
      return "cost";
  }
  return "?";
}

std::vector<std::string> design_grid() {
  std::vector<std::string> g = analysis_table1_specs();
  auto with_cache = [&](const std::string& s) {
    g.push_back(s);
    g.push_back(s + "+cache");
  };
  for (int64_t w : kWidths) g.push_back(fmt::format("band:{}", w));
  for (int64_t w : kWidths) g.push_back(fmt::format("order:{}", w));
  for (double b : kBases) with_cache(geom_spec(b));
  with_cache("linear");
  for (double p : kExponents) with_cache(power_spec(p));
  with_cache("fib");
  for (int64_t L : kRulerLengths) with_cache(fmt::format("ruler:{}", L));
  // Local + long-range: a window of W recent positions and a sparse family.
  for (int64_t w : kUnionWidths) {
    for (double b : kBases) with_cache(fmt::format("order:{}+{}", w, geom_spec(b)));
    for (double p : kExponents) with_cache(fmt::format("order:{}+{}", w, power_spec(p)));
    with_cache(fmt::format("order:{}+fib", w));
  }
  // Two sparse families.
  for (double b : kUnionBases)
    for (double p : kExponents) with_cache(fmt::format("{}+{}", geom_spec(b), power_spec(p)));
  for (int64_t L : kRulerLengths) {
    for (double b : kUnionBases) with_cache(fmt::format("ruler:{}+{}", L, geom_spec(b)));
    for (double p : {2.0, 3.0}) with_cache(fmt::format("ruler:{}+{}", L, power_spec(p)));
  }
  // Drop repeats (Table 1's names reappear in the families), keeping the first.
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& s : g)
    if (seen.insert(s).second) out.push_back(std::move(s));
  return out;
}

bool design_dominates(const DesignCandidate& a, const DesignCandidate& b) {
  const int64_t pa = path_key(a), pb = path_key(b);
  const bool le = a.time_max <= b.time_max && a.cache_max <= b.cache_max && pa <= pb;
  const bool lt = a.time_max < b.time_max || a.cache_max < b.cache_max || pa < pb;
  return le && lt;
}

DesignResult design_search(const DesignOptions& opt) {
  check_options(opt);
  const auto t0 = std::chrono::steady_clock::now();
  DesignResult r;
  r.options = opt;
  std::vector<std::string> specs = design_grid();
  for (const auto& s : opt.extra_specs) specs.push_back(s);
  r.grid_size = static_cast<int64_t>(specs.size());
  const int64_t T = opt.T;
  const auto named = analysis_table1_specs();

  // Distinct patterns at T: key = (cache-efficient after the unit-lattice reduction, recurrent,
  // offsets below T); causal/dense/band/order are keyed by their own spec.
  std::vector<Pattern> patterns;
  std::set<std::tuple<bool, bool, std::vector<int64_t>, std::string>> seen;
  for (const auto& s : specs) {
    Pattern p = Pattern::parse(s);  // bad extra specs fail before any work
    const Pattern eq = analysis_equivalent_pattern(p, T);
    std::tuple<bool, bool, std::vector<int64_t>, std::string> key;
    if (eq.translation_invariant_family() || eq.kind() == PatternKind::kOrder) {
      key = {eq.cache_efficient(), true, eq.offsets_upto(T - 1), ""};
    } else if (eq.kind() == PatternKind::kBand) {
      key = {false, false, eq.offsets_upto(T - 1), ""};
    } else {
      key = {eq.cache_efficient(), eq.recurrent(), {}, eq.spec()};
    }
    if (eq.kind() == PatternKind::kDense) key = {false, true, eq.offsets_upto(T - 1), ""};    // = linear
    if (eq.kind() == PatternKind::kCausal) key = {false, false, eq.offsets_upto(T - 1), ""};  // = band:T-1
    if (!seen.insert(key).second) continue;
    patterns.push_back(std::move(p));
  }

  // The graph work is shared among the candidates that need graph searches (not translation-
  // invariant at T): each gets an equal part, at least enough for one source.
  int64_t graph_candidates = 0;
  for (const auto& p : patterns)
    if (!analysis_equivalent_pattern(p, T).translation_invariant() &&
        (opt.max_time < 1 || p.row_size(T - 1) <= opt.max_time))
      ++graph_candidates;
  AnalyzeOptions aopt;
  // Up to T = 256 every search is exact (T · nnz <= T^3 = 2^24 edge visits per candidate).
  aopt.max_graph_work = std::max<int64_t>(opt.graph_work / std::max<int64_t>(graph_candidates, 1),
                                          T <= kDesignExactT ? T * T * T : int64_t{1} << 16);
  aopt.exact_congestion = opt.exact_max_n >= 1 && T / 2 <= opt.exact_max_n;
  aopt.exact_max_n = std::max<int64_t>(opt.exact_max_n, 1);
  aopt.exact_time_limit_s = opt.exact_time_limit_s;
  aopt.heuristic_max_n = 256;
  aopt.heuristic_passes = 4;

  const auto limits = limits_of(opt);
  for (const auto& p : patterns) {
    DesignCandidate c;
    c.spec = p.spec();
    c.named = std::find(named.begin(), named.end(), c.spec) != named.end();
    c.family = c.named ? "named" : family_of(p);
    c.recurrent = p.recurrent();
    if (opt.max_time >= 1) {
      // Screen: |P(T-1)| <= max_i |P(i)| (equal for plain patterns). O(K).
      const int64_t last_row = p.row_size(T - 1);
      if (last_row > opt.max_time) {
        c.measured = false;
        c.time_max = last_row;
        c.path_exact = false;
        c.misses = fmt::format("--max-time {} (time >= {}, screened)", opt.max_time, last_row);
        r.candidates.push_back(std::move(c));
        continue;
      }
    }
    const PatternReport rep = analyze_pattern(p, T, aopt);
    c.time_max = rep.cost_max;
    c.time_mean = rep.cost_mean;
    c.cache_max = rep.cache_max;
    c.cache_mean = rep.cache_mean;
    c.path_infinite = rep.shortest_path.infinite;
    c.path_max = rep.shortest_path.max;
    c.path_mean = rep.shortest_path.mean;
    c.path_exact = rep.shortest_path.exact;
    const auto& cg = rep.congestion;
    c.congestion_lower = cg.lower_bound >= 0 ? cg.lower_bound : -1;
    const int64_t ub = cg.upper_bound();
    c.congestion_upper = ub >= 0 ? ub : -1;
    c.congestion_exact = cg.exact >= 0 ? cg.exact : -1;
    c.congestion_optimal = cg.exact >= 0 && cg.exact_status.rfind("optimal", 0) == 0;
    c.within_budget = true;
    for (const auto& l : limits) {
      if (meets(c, l)) continue;
      c.within_budget = false;
      c.misses += fmt::format("{}{} {} ({}{})", c.misses.empty() ? "" : ", ", l.flag, l.value, metric_text(c, l),
                              std::string(l.name) == "path" && !c.path_exact ? ", not verified" : "");
    }
    r.candidates.push_back(std::move(c));
  }

  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (r.candidates[i].within_budget) r.ranked.push_back(i);
  if (r.ranked.empty()) fail_nothing_fits(opt, r.candidates);
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [&](size_t a, size_t b) {
    return rank_key(r.candidates[a], opt.objective) < rank_key(r.candidates[b], opt.objective);
  });

  // Pareto front among the candidates within the budget (O(N^2), N ~ 10^3).
  for (size_t i : r.ranked) {
    bool dominated = false;
    for (size_t j : r.ranked)
      if (j != i && design_dominates(r.candidates[j], r.candidates[i])) {
        dominated = true;
        break;
      }
    if (!dominated) {
      r.candidates[i].on_front = true;
      r.front.push_back(i);
    }
  }
  std::sort(r.front.begin(), r.front.end(), [&](size_t a, size_t b) {
    const auto& x = r.candidates[a];
    const auto& y = r.candidates[b];
    return std::make_tuple(x.time_max, x.cache_max, path_key(x)) <
           std::make_tuple(y.time_max, y.cache_max, path_key(y));
  });

  // The recommendation: the best-ranked front member; the runner-up: the next front member.
  size_t rec = r.ranked.front(), runner = r.ranked.front();
  bool have_runner = false;
  for (size_t i : r.ranked) {
    if (!r.candidates[i].on_front) continue;
    rec = i;
    break;
  }
  for (size_t i : r.ranked)
    if (i != rec && r.candidates[i].on_front) {
      runner = i;
      have_runner = true;
      break;
    }
  r.recommended = static_cast<int64_t>(rec);
  const auto& c = r.candidates[rec];

  // Why: the objective value, the binding limit (highest use of its limit), what it buys.
  std::string obj;
  switch (opt.objective) {
    case DesignObjective::kPath:
      obj = fmt::format("the shortest max path ({}, mean {:.2f})", path_cell(c), c.path_mean);
      break;
    case DesignObjective::kCongestion:
      obj = fmt::format("the lowest copy-task congestion ({})", congestion_key(c));
      break;
    case DesignObjective::kCost:
      obj = fmt::format("the lowest time per token ({} reads, mean {:.2f})", c.time_max, c.time_mean);
      break;
  }
  std::string binding = "no limit was given";
  double best_use = -1;
  for (const auto& l : limits) {
    const double use = static_cast<double>(l.metric(c)) / static_cast<double>(l.value);
    if (use > best_use) {
      best_use = use;
      binding = fmt::format("{} binds ({} of {})", l.flag, l.metric(c), l.value);
    }
  }
  std::string buys;
  if (have_runner) {
    const auto& n = r.candidates[runner];
    std::vector<std::string> gains, costs;
    auto cmp = [&](int64_t mine, int64_t theirs, const char* what) {
      if (mine < theirs) gains.push_back(fmt::format("{} {} vs {}", what, mine, theirs));
      if (mine > theirs) costs.push_back(fmt::format("{} {} vs {}", what, mine, theirs));
    };
    cmp(path_key(c), path_key(n), "path");
    cmp(congestion_key(c), congestion_key(n), "congestion");
    cmp(c.time_max, n.time_max, "time");
    cmp(c.cache_max, n.cache_max, "cache");
    buys = fmt::format("; over the runner-up {} it gains {}{}", n.spec,
                       gains.empty() ? std::string("nothing on the maxima (ties broken by the means)")
                                     : fmt::format("{}", fmt::join(gains, ", ")),
                       costs.empty() ? std::string() : fmt::format(" for {}", fmt::join(costs, ", ")));
  }
  r.why = fmt::format("{} has {} of the {} candidates within the budget; {}{}.", c.spec, obj, r.ranked.size(), binding,
                      buys);
  r.train_command = fmt::format("mixlab train --task copy --mixer resolvent:{}", c.spec);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json design_candidate_json(const DesignCandidate& c) {
  auto opt_int = [](int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"spec", c.spec},
          {"family", c.family},
          {"named", c.named},
          {"recurrent", c.recurrent},
          {"time_max", c.time_max},
          {"time_mean", c.time_mean},
          {"cache_max", c.cache_max},
          {"cache_mean", c.cache_mean},
          {"path_max", c.path_infinite ? nlohmann::json("inf") : nlohmann::json(c.path_max)},
          {"path_mean", c.path_infinite ? nlohmann::json("inf") : nlohmann::json(c.path_mean)},
          {"path_exact", c.path_exact},
          {"congestion_lower", opt_int(c.congestion_lower)},
          {"congestion_upper", opt_int(c.congestion_upper)},
          {"congestion_exact", opt_int(c.congestion_exact)},
          {"congestion_optimal", c.congestion_optimal},
          {"measured", c.measured},
          {"within_budget", c.within_budget},
          {"on_front", c.on_front},
          {"train", fmt::format("mixlab train --task copy --mixer resolvent:{}", c.spec)}};
}

nlohmann::json design_json(const DesignResult& r) {
  const auto& o = r.options;
  auto lim = [](int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["T"] = o.T;
  j["positions"] = "0-based";
  j["limits"] = {{"max_time", lim(o.max_time)}, {"max_cache", lim(o.max_cache)}, {"max_path", lim(o.max_path)}};
  j["objective"] = design_objective_name(o.objective);
  j["grid_size"] = r.grid_size;
  j["distinct"] = r.candidates.size();
  j["within_budget"] = r.ranked.size();
  j["table"] = nlohmann::json::array();
  for (size_t i : r.ranked) j["table"].push_back(design_candidate_json(r.candidates[i]));
  j["front"] = nlohmann::json::array();
  for (size_t i : r.front) j["front"].push_back(r.candidates[i].spec);
  const auto& c = r.candidates[static_cast<size_t>(r.recommended)];
  j["recommendation"] = {{"spec", c.spec}, {"why", r.why}, {"train", r.train_command}};
  j["seconds"] = r.seconds;
  return j;
}

std::string design_text(const DesignResult& r) {
  const auto& o = r.options;
  std::string out;
  auto lim = [](const char* flag, int64_t v) { return v >= 0 ? fmt::format(" {} {}", flag, v) : std::string(); };
  std::string limits = lim("--max-time", o.max_time) + lim("--max-cache", o.max_cache) + lim("--max-path", o.max_path);
  out += fmt::format(
      "mixlab design at T = {} (positions 0-based), objective {}, limits:{}\n"
      "{} specs in the grid, {} distinct at this T, {} within the budget ({:.1f} s)\n\n",
      o.T, design_objective_name(o.objective), limits.empty() ? " none" : limits, r.grid_size, r.candidates.size(),
      r.ranked.size(), r.seconds);
  constexpr const char* kRow = "{:>4} {:<30} {:>5} {:>7} {:>6} {:>8} {:>5} {:>6} {:>4} {:>4} {:>5} {:>5}\n";
  auto row = [&](const std::string& rank, const DesignCandidate& c) {
    auto cell = [](int64_t v) { return v >= 0 ? std::to_string(v) : std::string("—"); };
    std::string exact = c.congestion_exact >= 0 ? cell(c.congestion_exact) + (c.congestion_optimal ? "" : "*") : "—";
    return fmt::format(kRow, rank, c.spec.size() > 30 ? c.spec.substr(0, 29) + "…" : c.spec, c.time_max,
                       fmt::format("{:.2f}", c.time_mean), c.cache_max, fmt::format("{:.1f}", c.cache_mean),
                       path_cell(c),
                       c.path_infinite ? "∞" : fmt::format("{}{:.2f}", c.path_exact ? "" : "~", c.path_mean),
                       cell(c.congestion_lower), cell(c.congestion_upper), exact, c.on_front ? "yes" : "");
  };
  const std::string header =
      fmt::format(kRow, "rank", "spec", "time", "mean", "cache", "mean", "path", "mean", "lb", "ub", "exact", "front");
  out += fmt::format("Ranked by {} (top {} of {}):\n", design_objective_name(o.objective),
                     std::min<size_t>(r.ranked.size(), static_cast<size_t>(o.top)), r.ranked.size());
  out += header;
  for (size_t k = 0; k < r.ranked.size() && k < static_cast<size_t>(o.top); ++k)
    out += row(std::to_string(k + 1), r.candidates[r.ranked[k]]);
  out += fmt::format("\nPareto front over (time max, cache max, path max), {} members:\n", r.front.size());
  out += header;
  std::map<size_t, size_t> rank_of;
  for (size_t k = 0; k < r.ranked.size(); ++k) rank_of[r.ranked[k]] = k + 1;
  for (size_t k = 0; k < r.front.size() && k < 40; ++k)
    out += row(std::to_string(rank_of[r.front[k]]), r.candidates[r.front[k]]);
  if (r.front.size() > 40) out += fmt::format("  ... {} more (--json lists them all)\n", r.front.size() - 40);
  out +=
      "\ntime: past positions read per token, max over i < T (the A row reads one more); cache: positions kept after "
      "a\n"
      "decode step; path: shortest path over all pairs j < i < T ('≥'/'~': from sampled sources, a lower bound);\n"
      "congestion of the copy task on T nodes: lb (Prop. 4.7), ub (best routing found), exact (integer program,\n"
      "n <= " +
      std::to_string(o.exact_max_n) +
      "; '*' not proven optimal). A front member with a '≥' path is placed by that lower bound.\n";
  const auto& c = r.candidates[static_cast<size_t>(r.recommended)];
  out += fmt::format("\nRecommendation: {}\n  {}\n  {}\n", c.spec, r.why, r.train_command);
  return out;
}

}  // namespace mixlab
