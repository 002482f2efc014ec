// Every row of the kernel table (tests/kernels/kernel_table.h), fast against reference in the same
// run: BM_<row>/<fast|reference>/<fwd|fwd_bwd>/<shape> at the row's bench shape(s), float32.
//   fwd      the row's function under NoGradGuard (the inference paths);
//   fwd_bwd  the function with its grad inputs requiring grad, then the gradients of
//            sum_i <out_i, g_i> (fixed random g_i, drawn before the timing).
// Inputs are drawn once per benchmark, as test_kernels draws them (same seeds). After the runs a
// table gives, per row, shape and mode, the CPU times (the whole process: every intra-op thread
// counts) and reference / fast; only ratios of this table are worth quoting, and only from one run
// (MIXLAB_THREADS=1 on a shared machine). The CPU block cache is installed, as in the CLI.
//
//   MIXLAB_THREADS=1 ./build/bench/bench_kernels --benchmark_min_time=0.2
//   ./build/bench/bench_kernels --benchmark_filter='BM_toeplitz_fft/'      (one row)
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_setup.h"
#include "kernels/kernel_table.h"

namespace {

using mixlab::testing::KernelCase;
using mixlab::testing::KernelInputs;
using mixlab::testing::Shape;
using mixlab::testing::Tensors;

void run_row(benchmark::State& state, const KernelCase& row, const Shape& shape, bool fast, bool backward) {
  const KernelInputs base =
      row.make_inputs(shape, torch::kFloat, mixlab::testing::kernel_seed(row.name, shape.label()));
  KernelInputs in = base;
  Tensors leaves;
  if (backward) {
    for (size_t i : row.grad_inputs) {
      in.tensors[i] = base.tensors[i].detach().clone().requires_grad_(true);
      leaves.push_back(in.tensors[i]);
    }
  }
  auto scope = fast ? mixlab::testing::enter_fast_scope(row, shape) : nullptr;
  const auto& fn = fast ? row.fast : row.reference;
  Tensors upstream;
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    for (const auto& out : fn(in)) upstream.push_back(torch::randn(out.sizes(), out.options()));
  }
  for (auto _ : state) {
    if (backward) {
      auto grads = torch::autograd::grad(fn(in), leaves, upstream, /*retain_graph=*/false, /*create_graph=*/false,
                                         /*allow_unused=*/true);
      benchmark::DoNotOptimize(grads.data());
    } else {
      torch::NoGradGuard no_grad;
      auto outs = fn(in);
      benchmark::DoNotOptimize(outs.front().data_ptr());
    }
  }
}

// One line of the closing table: a row, a shape and a mode, both sides.
struct Pair {
  std::string row, shape, mode;
  std::string fast_name, reference_name;
};

// The console display that also keeps each run's CPU time (ms), by benchmark name.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (!r.error_occurred && r.run_type == Run::RT_Iteration)
        ms_[r.run_name.function_name].push_back(r.GetAdjustedCPUTime());
    benchmark::ConsoleReporter::ReportRuns(runs);
  }
  // The median over repetitions; < 0 when the benchmark did not run (filtered out, failed).
  double median_ms(const std::string& name) const {
    auto it = ms_.find(name);
    if (it == ms_.end() || it->second.empty()) return -1;
    auto v = it->second;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }

 private:
  std::map<std::string, std::vector<double>> ms_;
};

void print_table(const std::vector<Pair>& pairs, const CollectingReporter& reporter, int threads) {
  std::printf("\nkernel table, float32, %d intra-op thread(s): CPU ms per call (median), reference / fast\n", threads);
  std::printf("%-34s %-26s %-8s %12s %12s %10s\n", "row", "shape", "mode", "fast ms", "reference ms", "ref/fast");
  for (const auto& p : pairs) {
    const double f = reporter.median_ms(p.fast_name), r = reporter.median_ms(p.reference_name);
    if (f < 0 && r < 0) continue;
    auto cell = [](double ms) { return ms < 0 ? std::string("-") : std::to_string(ms).substr(0, 10); };
    const std::string ratio = f > 0 && r >= 0 ? std::to_string(r / f).substr(0, 7) + "x" : "-";
    std::printf("%-34s %-26s %-8s %12s %12s %10s\n", p.row.c_str(), p.shape.c_str(), p.mode.c_str(), cell(f).c_str(),
                cell(r).c_str(), ratio.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kEnvOrAllCores).threads;
  std::vector<Pair> pairs;
  for (const KernelCase& row : mixlab::testing::kernel_table()) {
    for (const Shape& shape : row.bench_shapes) {
      for (bool backward : {false, true}) {
        const std::string mode = backward ? "fwd_bwd" : "fwd";
        Pair p{row.name, shape.label(), mode, "", ""};
        for (bool fast : {true, false}) {
          const std::string name =
              "BM_" + row.name + "/" + (fast ? "fast" : "reference") + "/" + mode + "/" + shape.label();
          (fast ? p.fast_name : p.reference_name) = name;
          benchmark::RegisterBenchmark(
              name.c_str(),
              [&row, shape, fast, backward](benchmark::State& st) { run_row(st, row, shape, fast, backward); })
              ->Unit(benchmark::kMillisecond)
              ->MeasureProcessCPUTime();
        }
        pairs.push_back(p);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  print_table(pairs, reporter, threads);
  return 0;
}
