// Exact pattern metrics: cost, cache (shortcuts vs brute force), shortest paths (coin change vs
// graph vs BFS), congestion (bounds, shifted, heuristic, exact ILP vs enumeration), reports, plot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <queue>
#include <set>

#include "mixlab/analysis/analyze.h"
#include "mixlab/analysis/congestion.h"
#include "mixlab/analysis/format.h"
#include "mixlab/analysis/metrics.h"
#include "mixlab/core/error.h"
#include "support/brute_force_congestion.h"
#include "support/expect_error.h"

namespace analysis_test {

using namespace mixlab;

namespace {

const std::vector<std::string> kSpecs = {"causal",
                                         "band:1",
                                         "band:5",
                                         "dense",
                                         "linear",
                                         "order:1",
                                         "order:3",
                                         "pow2",
                                         "square",
                                         "offsets:1,3,7",
                                         "pow2+cache",
                                         "square+cache",
                                         "linear+cache",
                                         "offsets:1,3,7+cache",
                                         "offsets:1,2,5,11+cache",
                                         "geom:1.5",
                                         "geom:3+cache",
                                         "power:1.5",
                                         "power:2.5+cache",
                                         "fib",
                                         "fib+cache",
                                         "ruler:12",
                                         "ruler:12+cache",
                                         "band:3+pow2",
                                         "order:2+geom:1.5+cache"};

// Plain BFS over forward edges (u -> v iff u ∈ P(v)), multi-hop only for recurrent patterns.
std::vector<int32_t> bfs_reference(const Pattern& p, int64_t T, int64_t source) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(T));
  for (int64_t v = 0; v < T; ++v)
    for (int64_t u : p.row(v)) out[u].push_back(v);
  std::vector<int32_t> dist(static_cast<size_t>(T), kUnreachable);
  dist[source] = 0;
  std::queue<int64_t> q;
  q.push(source);
  while (!q.empty()) {
    int64_t u = q.front();
    q.pop();
    if (!p.recurrent() && u != source) continue;
    for (int64_t v : out[u])
      if (dist[v] == kUnreachable) {
        dist[v] = dist[u] + 1;
        q.push(v);
      }
  }
  return dist;
}

using mixlab_test::brute_force_congestion;

}  // namespace

TEST(AnalysisCost, RowsAndSizesMatchPattern) {
  for (const auto& spec : kSpecs) {
    auto p = Pattern::parse(spec);
    for (int64_t T : {1, 2, 3, 17, 130}) {
      auto g = pattern_graph_build(p, T);
      auto sizes = analysis_row_sizes(p, T);
      for (int64_t i = 0; i < T; ++i) {
        auto row = p.row(i);
        std::vector<int64_t> got(g.pred.begin() + g.start[i], g.pred.begin() + g.start[i + 1]);
        ASSERT_EQ(got, row) << spec << " T=" << T << " i=" << i;
        ASSERT_EQ(sizes[i], static_cast<int64_t>(row.size())) << spec << " i=" << i;
      }
    }
  }
}

TEST(AnalysisCost, KnownCosts) {
  auto rep = analyze_pattern(Pattern::parse("pow2"), 1024);
  EXPECT_EQ(rep.cost_max, 10);  // offsets 1, 2, ..., 512 at row 1023
  EXPECT_EQ(analyze_pattern(Pattern::parse("order:8"), 100).cost_max, 8);
  auto dense = analyze_pattern(Pattern::parse("dense"), 10);
  EXPECT_EQ(dense.cost_max, 9);
  EXPECT_DOUBLE_EQ(dense.cost_mean, 4.5);  // 0 + 1 + ... + 9 over 10 rows
}

TEST(AnalysisCache, ShortcutsEqualBruteForce) {
  for (const auto& spec : kSpecs) {
    auto p = Pattern::parse(spec);
    for (int64_t T : {1, 2, 3, 7, 64, 129, 300}) {
      EXPECT_EQ(analysis_cache_sizes(p, T), analysis_cache_sizes_reference(p, T)) << spec << " T=" << T;
    }
  }
}

TEST(AnalysisCache, CacheEfficientEqualsNextSet) {
  for (const auto& spec : {"pow2+cache", "square+cache", "offsets:1,3,7+cache"}) {
    auto p = Pattern::parse(spec);
    const int64_t T = 200;
    auto cache = analysis_cache_sizes(p, T);
    auto sets = cache_sets_recursive(p, T);  // 1-based S_1..S_T
    for (int64_t i = 1; i < T; ++i) {        // 1-based step i; cache after it is cache[i - 1]
      std::set<int64_t> prev(sets[i - 1].begin(), sets[i - 1].end());
      prev.insert(i);
      EXPECT_EQ(cache[i - 1], static_cast<int64_t>(sets[i].size())) << spec << " i=" << i;
      EXPECT_LE(cache[i - 1], static_cast<int64_t>(prev.size())) << spec << " i=" << i;
    }
    EXPECT_EQ(cache[T - 1], 0);
  }
}

TEST(AnalysisCache, KnownShapes) {
  const int64_t T = 100;
  auto band = analysis_cache_sizes(Pattern::parse("band:8"), T);
  auto order = analysis_cache_sizes(Pattern::parse("order:5"), T);
  auto dense = analysis_cache_sizes(Pattern::parse("dense"), T);
  auto causal = analysis_cache_sizes(Pattern::parse("causal"), T);
  for (int64_t i = 0; i + 1 < T; ++i) {
    EXPECT_EQ(band[i], std::min<int64_t>(i + 1, 8)) << i;
    EXPECT_EQ(order[i], std::min<int64_t>(i + 1, 5)) << i;
    EXPECT_EQ(dense[i], i + 1) << i;
    EXPECT_EQ(causal[i], i + 1) << i;
  }
  EXPECT_EQ(*std::max_element(band.begin(), band.end()), 8);
  // pow2 without the cache keeps O(T): every j < T/2 is still read by row j + T/2 or later.
  auto pow2 = analysis_cache_sizes(Pattern::parse("pow2"), 1024);
  EXPECT_GE(*std::max_element(pow2.begin(), pow2.end()), 512);
  auto pow2c = analysis_cache_sizes(Pattern::parse("pow2+cache"), 1024);
  EXPECT_LE(*std::max_element(pow2c.begin(), pow2c.end()), 11);
}

TEST(AnalysisShortestPath, ClosedForms) {
  const int64_t T = 5000;
  auto pow2 = analysis_distance_by_difference(Pattern::parse("pow2"), T);
  auto square = analysis_distance_by_difference(Pattern::parse("square"), T);
  auto order1 = analysis_distance_by_difference(Pattern::parse("order:1"), T);
  auto order3 = analysis_distance_by_difference(Pattern::parse("order:3"), T);
  auto dense = analysis_distance_by_difference(Pattern::parse("dense"), T);
  auto band = analysis_distance_by_difference(Pattern::parse("band:4"), T);
  int32_t square_max = 0;
  for (int64_t d = 1; d < T; ++d) {
    ASSERT_EQ(pow2[d], __builtin_popcountll(static_cast<unsigned long long>(d))) << d;
    ASSERT_LE(square[d], 4) << d;  // Cor. 4.5 (Lagrange)
    square_max = std::max(square_max, square[d]);
    ASSERT_EQ(order1[d], d);
    ASSERT_EQ(order3[d], (d + 2) / 3);
    ASSERT_EQ(dense[d], 1);
    ASSERT_EQ(band[d], d <= 4 ? 1 : kUnreachable);
  }
  EXPECT_GE(square_max, 3);  // the bound is not trivially 1 or 2
}

TEST(AnalysisShortestPath, GraphEqualsCoinChangeAndBfs) {
  const int64_t T = 70;
  for (const auto& spec : kSpecs) {
    auto p = Pattern::parse(spec);
    auto g = pattern_graph_build(p, T);
    std::vector<int32_t> coin;
    if (p.translation_invariant()) coin = analysis_distance_by_difference(p, T);
    for (int64_t j = 0; j < T; ++j) {
      auto dist = graph_distances_from(g, j, T - 1);
      auto bfs = bfs_reference(p, T, j);
      for (int64_t i = j; i < T; ++i) {
        ASSERT_EQ(dist[i], bfs[i]) << spec << " " << j << "->" << i;
        if (!coin.empty()) ASSERT_EQ(dist[i], coin[i - j]) << spec << " " << j << "->" << i;
      }
    }
  }
}

TEST(AnalysisShortestPath, StatsWeightPairs) {
  const int64_t T = 90;
  for (const auto& spec : kSpecs) {
    auto p = Pattern::parse(spec);
    auto s = analysis_shortest_path(p, T, int64_t{1} << 40);
    EXPECT_TRUE(s.exact);
    // Brute force over every pair.
    int64_t pairs = 0, unreachable = 0, mx = 0;
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) {
      auto bfs = bfs_reference(p, T, j);
      for (int64_t i = j + 1; i < T; ++i) {
        ++pairs;
        if (bfs[i] == kUnreachable) {
          ++unreachable;
          continue;
        }
        mx = std::max<int64_t>(mx, bfs[i]);
        sum += bfs[i];
      }
    }
    EXPECT_EQ(s.pairs, pairs) << spec;
    EXPECT_EQ(s.unreachable_pairs, unreachable) << spec;
    EXPECT_EQ(s.infinite, unreachable > 0) << spec;
    EXPECT_EQ(s.max, mx) << spec;
    EXPECT_NEAR(s.mean, sum / static_cast<double>(pairs - unreachable), 1e-9) << spec;
  }
  // Non-recurrent: causal is 1 everywhere, band is infinite beyond its window.
  EXPECT_EQ(analysis_shortest_path(Pattern::parse("causal"), 50, 1000).max, 1);
  EXPECT_TRUE(analysis_shortest_path(Pattern::parse("band:8"), 50, 1000).infinite);
  // Rows recomputed per source (graph too large to store) give the same statistics.
  for (const auto& spec : {"pow2+cache", "square+cache"}) {
    auto stored = analysis_shortest_path(Pattern::parse(spec), 150, int64_t{1} << 40);
    auto streamed = analysis_shortest_path(Pattern::parse(spec), 150, int64_t{1} << 40, 10);
    EXPECT_EQ(stored.max, streamed.max) << spec;
    EXPECT_EQ(stored.pairs, streamed.pairs) << spec;
    EXPECT_DOUBLE_EQ(stored.mean, streamed.mean) << spec;
  }
  // A small budget samples sources and says so.
  auto sampled = analysis_shortest_path(Pattern::parse("pow2+cache"), 512, 20000);
  EXPECT_FALSE(sampled.exact);
  EXPECT_LT(sampled.sources, 512);
  EXPECT_GE(sampled.sources, 1);
}

TEST(AnalysisCongestion, RoutingsAreValidAndBoundsHold) {
  for (const auto& spec : {"pow2", "square", "order:1", "order:3", "dense", "offsets:1,3,7", "linear"}) {
    auto p = Pattern::parse(spec);
    for (int64_t n : {1, 2, 5, 12, 33}) {
      auto shifted = congestion_shifted_routing(p, n);
      routing_validate(p, shifted);
      int64_t cs = routing_congestion(shifted);
      EXPECT_EQ(cs, congestion_shifted_value(p, n)) << spec << " n=" << n;
      auto d = analysis_distance_by_difference(p, n + 1)[n];
      EXPECT_LE(cs, d) << spec << " n=" << n;  // Prop. 4.8
      int64_t lb = (d + 2) / 2;
      auto heur = congestion_heuristic(p, shifted, 8, lb);
      routing_validate(p, heur);
      int64_t ch = routing_congestion(heur);
      EXPECT_LE(ch, cs) << spec << " n=" << n;
      EXPECT_GE(ch, lb) << spec << " n=" << n;  // Prop. 4.7
      auto sp = congestion_shortest_routing(p, n);
      routing_validate(p, sp);
      for (int64_t c = 0; c < n; ++c) EXPECT_EQ(static_cast<int64_t>(sp.paths[c].size()) - 1, d);
    }
  }
}

TEST(AnalysisCongestion, ExactMatchesEnumeration) {
  struct Case {
    const char* spec;
    int64_t n;
  };
  for (auto c : {Case{"pow2", 3}, Case{"pow2", 4}, Case{"offsets:1,3", 5}, Case{"order:1", 4}, Case{"square", 4},
                 Case{"pow2+cache", 4}, Case{"square+cache", 4}, Case{"causal", 4}}) {
    auto p = Pattern::parse(c.spec);
    int64_t brute = brute_force_congestion(p, c.n);
    auto ex = congestion_exact_ilp(p, c.n, 1, c.n, 30.0);
    EXPECT_TRUE(ex.optimal) << c.spec;
    EXPECT_EQ(ex.value, brute) << c.spec << " n=" << c.n;
    EXPECT_EQ(routing_congestion(ex.routing), ex.value);
    auto rep = analyze_pattern(p, 2 * c.n).congestion;
    EXPECT_LE(rep.prop47, rep.lower_bound) << c.spec;
    EXPECT_LE(rep.lower_bound, brute) << c.spec;
    EXPECT_GE(rep.upper_bound(), brute) << c.spec;
  }
}

TEST(AnalysisCongestion, ReportOrdering) {
  AnalyzeOptions opt;
  opt.exact_congestion = true;
  for (const auto& spec : {"pow2", "square", "order:1", "order:2", "pow2+cache", "square+cache", "offsets:1,3,7"}) {
    auto r = analyze_pattern(Pattern::parse(spec), 24, opt);  // n = 12
    const auto& c = r.congestion;
    ASSERT_EQ(c.n, 12);
    ASSERT_GE(c.exact, 1) << spec << ": " << c.exact_status;
    EXPECT_LE(c.prop47, c.lower_bound) << spec;
    EXPECT_LE(c.lower_bound, c.exact) << spec;
    int64_t start = c.shifted >= 0 ? c.shifted : c.shortest;
    if (c.heuristic >= 0) {
      EXPECT_LE(c.exact, c.heuristic) << spec;
      EXPECT_LE(c.heuristic, start) << spec;
    }
    EXPECT_LE(c.exact, start) << spec;
  }
  // order:1: a single path per commodity, every path goes through the middle nodes.
  auto o1 = analyze_pattern(Pattern::parse("order:1"), 24, opt).congestion;
  EXPECT_EQ(o1.shifted, 12);
  EXPECT_EQ(o1.exact, 12);
  for (const auto& spec : {"dense", "causal"}) {
    auto c = analyze_pattern(Pattern::parse(spec), 24, opt).congestion;
    EXPECT_EQ(c.lower_bound, 1) << spec;
    EXPECT_EQ(c.exact, 1) << spec;
    EXPECT_EQ(c.upper_bound(), 1) << spec;
  }
  auto band = analyze_pattern(Pattern::parse("band:4"), 24, opt).congestion;
  EXPECT_EQ(band.lower_bound, kAnalysisInf);
  EXPECT_EQ(band.upper_bound(), kAnalysisInf);
}

TEST(AnalysisCongestion, HeuristicImprovesShortestRouting) {
  auto p = Pattern::parse("pow2+cache");
  const int64_t n = 32;
  auto start = congestion_shortest_routing(p, n);
  auto best = congestion_heuristic(p, start, 8, 1);
  routing_validate(p, best);
  EXPECT_LT(routing_congestion(best), routing_congestion(start));
  // With zero passes the start comes back unchanged.
  EXPECT_EQ(routing_congestion(congestion_heuristic(p, start, 0, 1)), routing_congestion(start));
}

TEST(AnalysisCongestion, TimeLimitIsReported) {
  // square at n = 32: lower bound 2, shifted 3; proving 3 optimal takes GLPK seconds. With a tiny
  // limit the result must either be proven or say that it is not — never a wrong "optimal".
  AnalyzeOptions opt;
  opt.exact_congestion = true;
  opt.exact_time_limit_s = 0.05;
  auto c = analyze_pattern(Pattern::parse("square"), 64, opt).congestion;
  ASSERT_EQ(c.lower_bound, 2);
  ASSERT_EQ(c.shifted, 3);
  if (c.exact_status == "optimal") {
    EXPECT_EQ(c.exact, 3);
  } else {
    EXPECT_TRUE(c.exact_status.rfind("not proven optimal", 0) == 0 || c.exact_status.rfind("no solution", 0) == 0)
        << c.exact_status;
    if (c.exact != kAnalysisNone) EXPECT_GE(c.exact, 2);
  }
}

TEST(AnalysisCongestion, CapsAreReported) {
  AnalyzeOptions opt;
  opt.heuristic_max_n = 4;
  opt.exact_congestion = true;
  opt.exact_max_n = 4;
  auto c = analyze_pattern(Pattern::parse("square"), 64, opt).congestion;  // n = 32: d = 3, lb 2, shifted 3
  EXPECT_EQ(c.heuristic, kAnalysisNone);
  EXPECT_NE(c.heuristic_status.find("skipped"), std::string::npos) << c.heuristic_status;
  EXPECT_NE(c.exact_status.find("not run"), std::string::npos) << c.exact_status;
  opt.max_graph_work = 1000;  // too small for the +cache graph: falls back to the jump bound
  auto cc = analyze_pattern(Pattern::parse("pow2+cache"), 256, opt).congestion;
  EXPECT_NE(cc.lower_bound_source.find("max jump"), std::string::npos);
  EXPECT_GE(cc.lower_bound, 1);
}

TEST(AnalysisReport, Table1Rows) {
  std::vector<PatternReport> reports;
  for (const auto& spec : analysis_table1_specs()) reports.push_back(analyze_pattern(Pattern::parse(spec), 64));
  ASSERT_EQ(reports.size(), 9u);
  EXPECT_EQ(reports[0].spec, "causal");
  EXPECT_EQ(reports[0].shortest_path.max, 1);
  EXPECT_EQ(reports[0].cost_max, 63);
  EXPECT_TRUE(reports[1].shortest_path.infinite);  // band:8
  EXPECT_EQ(reports[2].shortest_path.max, 63);     // order:1: d = i - j
  EXPECT_EQ(reports[4].shortest_path.max, 1);      // dense
  EXPECT_EQ(reports[5].shortest_path.max, 6);      // pow2: popcount(63)
  auto table = analysis_table_text(reports);
  size_t start = 0;
  while (start < table.size()) {
    size_t end = table.find('\n', start);
    // Columns, not bytes: ∞ and — take three bytes and one column.
    EXPECT_LE(display_width(table.substr(start, end - start)), 110u) << table.substr(start, end - start);
    start = end + 1;
  }
  EXPECT_NE(table.find("0-based"), std::string::npos);
  auto j = analysis_report_json(reports[1]);
  EXPECT_EQ(j["shortest_path"]["max"], "inf");
  EXPECT_EQ(j["T"], 64);
  EXPECT_EQ(j["time_per_token"]["A_row_max"], 9);
  EXPECT_NE(analysis_report_text(reports[6]).find("pow2+cache"), std::string::npos);
}

TEST(AnalysisErrors, BadArguments) {
  auto p = Pattern::parse("pow2");
  expect_error([&] { analyze_pattern(p, 0); }, {"analyze_pattern", "T must be > 0"});
  expect_error([&] { analyze_pattern(p, -5); }, {"T must be > 0", "-5"});
  expect_error([&] { analyze_pattern(p, kAnalysisMaxT + 1); }, {"T = ", "limit"});
  expect_error([] { Pattern::parse("bogus"); }, {"bogus", "unknown kind"});
  AnalyzeOptions opt;
  opt.exact_max_n = 100;
  expect_error([&] { analyze_pattern(p, 8, opt); }, {"exact_max_n"});
  expect_error([&] { congestion_exact_ilp(p, 65, 1, 2, 1.0); }, {"congestion_exact_ilp", "n must be"});
  expect_error([&] { congestion_shifted_routing(Pattern::parse("pow2+cache"), 4); }, {"not translation-invariant"});
  expect_error([&] { congestion_shifted_routing(Pattern::parse("band:2"), 4); }, {"no path"});
}

TEST(AnalysisPlot, WritesPngAndSvg) {
  auto dir = std::filesystem::temp_directory_path() / ("mixlab_plot_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const auto& spec : {"pow2+cache", "causal"}) {
    for (const char* ext : {".png", ".svg"}) {
      auto path = (dir / (std::string("plot_") + (spec[0] == 'c' ? "causal" : "pow2c") + ext)).string();
      analysis_plot(Pattern::parse(spec), 40, path);
      ASSERT_TRUE(std::filesystem::exists(path)) << path;
      EXPECT_GT(std::filesystem::file_size(path), 200u) << path;
      std::ifstream in(path, std::ios::binary);
      std::string head(8, '\0');
      in.read(head.data(), 8);
      if (std::string(ext) == ".png")
        EXPECT_EQ(head.substr(1, 3), "PNG");
      else
        EXPECT_NE(head.find("<?xml"), std::string::npos);
    }
  }
  expect_error([&] { analysis_plot(Pattern::parse("pow2"), 16, (dir / "x.jpg").string()); }, {".png or .svg", "x.jpg"});
  expect_error([&] { analysis_plot(Pattern::parse("pow2"), 257, (dir / "x.png").string()); }, {"T = 257", "256"});
  expect_error([&] { analysis_plot(Pattern::parse("pow2"), 16, "/nonexistent_dir_mixlab/x.png"); }, {"cannot"});
  std::filesystem::remove_all(dir);
}

// Issue 16 item 10: a +cache pattern whose lattice steps are all 1 has the rows of its plain
// pattern, and the analysis uses the plain pattern's O(T) shortcuts: linear+cache at T = 2^20 is
// analysed by coin change and shifted routing, not by an O(T^2) graph search.
TEST(AnalysisEquivalentPattern, UnitLatticeCachePatternsAreTheirPlainPattern) {
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("linear+cache"), int64_t{1} << 20).spec(), "linear");
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("offsets:1,2,3+cache"), 100).spec(), "offsets:1,2,3");
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("pow2+cache"), 4).spec(), "pow2");  // f = 1, 2 only
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("pow2+cache"), 64).spec(), "pow2+cache");
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("square+cache"), 64).spec(), "square+cache");
  EXPECT_EQ(analysis_equivalent_pattern(Pattern::parse("order:3"), 64).spec(), "order:3");
  for (const auto& spec : kSpecs) {
    auto p = Pattern::parse(spec);
    for (int64_t T : {1, 3, 5, 40}) {
      auto q = analysis_equivalent_pattern(p, T);
      for (int64_t i = 0; i < T; ++i) ASSERT_EQ(q.row(i), p.row(i)) << spec << " T=" << T << " i=" << i;
    }
  }
  expect_error([] { analysis_equivalent_pattern(Pattern::parse("linear+cache"), 0); }, "T must be > 0");
  const auto r = analyze_pattern(Pattern::parse("linear+cache"), int64_t{1} << 20);
  EXPECT_EQ(r.spec, "linear+cache");
  EXPECT_EQ(r.shortest_path.method, "coin-change");
  EXPECT_TRUE(r.shortest_path.exact);
  EXPECT_EQ(r.shortest_path.max, 1);
  EXPECT_EQ(r.congestion.d_min, 1);
  EXPECT_EQ(r.cost_max, (int64_t{1} << 20) - 1);
}

// Rates and durations as the progress lines, the compare table and compare --plan print them.
TEST(AnalysisFormat, RatesAndDurations) {
  EXPECT_EQ(format_rate(950), "950");
  EXPECT_EQ(format_rate(12345), "12.3k");
  EXPECT_EQ(format_rate(1.25e6), "1.25M");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(7620), "2h07m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_duration(2e7), "?");
}

}  // namespace analysis_test
