// The pattern design search (mixlab design, mixlab/analysis/design.h) over the whole grid
// (>= 1000 specs) at T = 4096 and T = 65536, on one core. Counters: candidates (distinct at T),
// within_budget, front. The search is single-threaded code (no parallel loops), so this is one
// core. Target (issue 40): <= 30 s at T = 65536.
//
//   bench_design [--benchmark_filter=65536]
#include <benchmark/benchmark.h>

#include "mixlab/analysis/design.h"

namespace {

void BM_DesignSearch(benchmark::State& state) {
  mixlab::DesignOptions o;
  o.T = state.range(0);
  o.max_time = 24;
  o.max_cache = 64 * 1024;
  mixlab::DesignResult r;
  for (auto _ : state) {
    r = mixlab::design_search(o);
    benchmark::DoNotOptimize(r.recommended);
  }
  state.counters["grid"] = static_cast<double>(r.grid_size);
  state.counters["candidates"] = static_cast<double>(r.candidates.size());
  state.counters["within_budget"] = static_cast<double>(r.ranked.size());
  state.counters["front"] = static_cast<double>(r.front.size());
}

BENCHMARK(BM_DesignSearch)->Arg(4096)->Arg(65536)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
