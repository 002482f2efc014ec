// Scaling of BRL-Attention against softmax attention and local:W (issue 13 item 4; seed 001
// Fig. 5/6, Tables 6/7 analogs on CPU): forward+backward time, inference (forward, no grad) time,
// decode time per token at a given context, and peak RSS, against T.
//
// Peak RSS is per process (getrusage), so run one case per process to read a case's peak:
//   for f in ...; do ./build/bench/bench_brl --benchmark_filter="^$f\$"; done   (docs/log/benchmarks-2026-11.md)
// bench/bench_brl.sh does that and keeps each case's JSON; `bench_brl --plot=PREFIX --from=DIR`
// then draws them (PREFIX_time.png, PREFIX_memory.png) without running anything.
// Mixers are built directly (not through the registry) so the binary links the brl area only.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench_setup.h"
#include "mixlab/analysis/line_chart.h"
#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"

namespace {

constexpr int64_t kC = 64, kH = 4, kW = 64, kM = 16;

mixlab::MixerPtr make(int kind, int64_t max_len) {
  mixlab::MixerDims d;
  d.d_model = kC;
  d.n_heads = kH;
  d.max_len = max_len;
  if (kind == 0) return std::make_shared<mixlab::AttentionMixer>(d, 0);
  if (kind == 1) return std::make_shared<mixlab::AttentionMixer>(d, kW);
  mixlab::BrlOptions o;
  o.window = kW;
  o.slots = kM;
  o.block = kW;
  return std::make_shared<mixlab::BrlMixer>(d, o);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void label(benchmark::State& state, int kind) {
  static const char* names[] = {"attention", "local:64", "brl:w=64:m=16"};
  state.SetLabel(names[kind]);
  state.counters["peak_rss_MB"] = peak_rss_mb();
}

void BM_FwdBwd(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int64_t T = state.range(1);
  torch::manual_seed(0);
  auto mixer = make(kind, T);
  auto x = torch::randn({1, T, kC}).requires_grad_(true);
  for (auto _ : state) {
    auto y = mixer->forward(x);
    y.sum().backward();
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(T), benchmark::Counter::kIsIterationInvariantRate);
  label(state, kind);
}

void BM_Inference(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int64_t T = state.range(1);
  torch::manual_seed(0);
  auto mixer = make(kind, T);
  torch::NoGradGuard no_grad;
  auto x = torch::randn({1, T, kC});
  for (auto _ : state) benchmark::DoNotOptimize(mixer->forward(x).data_ptr());
  label(state, kind);
}

// Decode time per token after a context of range(1) tokens (the context is stepped once, untimed).
void BM_DecodeAt(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const int64_t ctx = state.range(1);
  torch::manual_seed(0);
  auto mixer = make(kind, ctx + (int64_t{1} << 20));
  torch::NoGradGuard no_grad;
  auto s = mixer->init_state(1);
  auto x = torch::randn({1, kC});
  for (int64_t t = 0; t < ctx; ++t) mixer->step(*s, x);
  for (auto _ : state) benchmark::DoNotOptimize(mixer->step(*s, x).data_ptr());
  state.counters["cache_bytes"] = static_cast<double>(s->bytes());
  label(state, kind);
}

// Softmax attention stops at 4096 for fwd+bwd and 8192 for inference: its saved (T,T) scores
// would need several GB at 16384 on a shared 23 GB machine.
void train_sizes(benchmark::internal::Benchmark* b) {
  for (int kind : {0, 1, 2})
    for (int64_t T : {256, 1024, 4096, 16384})
      if (kind != 0 || T <= 4096) b->Args({kind, T});
}

void inference_sizes(benchmark::internal::Benchmark* b) {
  for (int kind : {0, 1, 2})
    for (int64_t T : {256, 1024, 4096, 16384})
      if (kind != 0 || T <= 8192) b->Args({kind, T});
  b->Args({0, 8192});
}

// --plot: every Google Benchmark JSON file in `dir` (one case each, as bench_brl.sh writes them)
// becomes a point: time and peak RSS against T, one series per mixer and mode (fwd+bwd,
// inference). Decode cases are a table, not a curve (two contexts), and are skipped.
void plot_from(const std::string& dir, const std::string& prefix) {
  mixlab::LineChart time, memory;
  time.title = "BRL scaling: one layer (C = 64, H = 4, batch 1), 1 thread";
  time.y_label = "CPU ms per call";
  memory.title = "BRL scaling: peak RSS of the process (about 160 MB is LibTorch)";
  memory.y_label = "peak RSS (MB)";
  for (mixlab::LineChart* c : {&time, &memory}) {
    c->x_label = "sequence length T (1Ki = 1024)";
    c->log_x = c->log_y = true;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  MIXLAB_CHECK(!files.empty(), "bench_brl: --from: no .json file in '{}'", dir);
  struct Point {
    double T, ms, rss;
  };
  std::map<std::string, std::vector<Point>> series;  // "mixer (mode)" -> points
  for (const auto& f : files) {
    std::ifstream in(f);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      MIXLAB_CHECK(false, "bench_brl: --from: '{}' is not Google Benchmark JSON: {}", f.string(), e.what());
    }
    for (const auto& b : j.at("benchmarks")) {
      // Repeated cases report aggregates: take the median and skip mean / stddev / cv.
      if (b.value("run_type", "iteration") == "aggregate" && b.value("aggregate_name", "") != "median") continue;
      const std::string name = b.at("name");  // BM_FwdBwd/<kind>/<T>/min_time:...
      const bool fwdbwd = name.rfind("BM_FwdBwd/", 0) == 0;
      if (!fwdbwd && name.rfind("BM_Inference/", 0) != 0) continue;
      const auto second = name.find('/', name.find('/') + 1);
      const double T = std::stod(name.substr(second + 1));
      const std::string unit = b.at("time_unit");
      const double ms = b.at("cpu_time").get<double>() * (unit == "s" ? 1e3 : unit == "us" ? 1e-3 : 1.0);
      series[b.at("label").get<std::string>() + (fwdbwd ? " fwd+bwd" : " inference")].push_back(
          {T, ms, b.at("peak_rss_MB").get<double>()});
    }
  }
  for (auto& [label, points] : series) {
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.T < b.T; });
    mixlab::LineSeries t, m;
    t.label = m.label = label;
    for (const auto& p : points) {
      t.x.push_back(p.T);
      t.y.push_back(p.ms);
      m.x.push_back(p.T);
      m.y.push_back(p.rss);
    }
    time.series.push_back(t);
    memory.series.push_back(m);
  }
  mixlab::line_chart_png(time, prefix + "_time.png");
  mixlab::line_chart_png(memory, prefix + "_memory.png");
  std::printf("wrote %s_time.png and %s_memory.png\n", prefix.c_str(), prefix.c_str());
}

}  // namespace

// Five repetitions, reported as median (and cv): at T = 16384 one call takes about a second and
// touches about 1 GB of fresh pages, and single calls on an idle machine varied by 2x.
BENCHMARK(BM_FwdBwd)
    ->Apply(train_sizes)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Inference)
    ->Apply(inference_sizes)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_DecodeAt)->ArgsProduct({{1, 2}, {1024, 16384}})->Unit(benchmark::kMicrosecond)->MinTime(0.2);

int main(int argc, char** argv) {
  // Without the block cache, faults were half of local:64's forward+backward at T 4096 (32 against
  // 15 ms on the Zen 5 VM; bench_setup.h says why every binary installs it).
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kLibTorchDefault);
  std::string plot_prefix, from;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--plot=", 7) == 0) {
      plot_prefix = argv[i] + 7;
    } else if (std::strncmp(argv[i], "--from=", 7) == 0) {
      from = argv[i] + 7;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!plot_prefix.empty() || !from.empty()) {
    try {
      MIXLAB_CHECK(!plot_prefix.empty() && !from.empty(),
                   "bench_brl: --plot=PREFIX and --from=DIR go together (got --plot='{}', --from='{}')", plot_prefix,
                   from);
      plot_from(from, plot_prefix);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    return 0;
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
