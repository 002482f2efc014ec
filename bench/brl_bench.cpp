// Scaling of BRL-Attention against softmax attention and local:W (issue 13 item 4; seed 001
// Fig. 5/6, Tables 6/7 analogs on CPU): forward+backward time, inference (forward, no grad) time,
// decode time per token at a given context, and peak RSS, against T.
//
// Peak RSS is per process (getrusage), so run one case per process to read a case's peak:
//   for f in ...; do ./build/bench/bench_brl --benchmark_filter="^$f\$"; done   (docs/BENCHMARKS.md)
// Mixers are built directly (not through the registry) so the binary links the brl area only.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "mixlab/brl/brl_mixer.h"

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

}  // namespace

BENCHMARK(BM_FwdBwd)->Apply(train_sizes)->Unit(benchmark::kMillisecond)->MinTime(0.2);
BENCHMARK(BM_Inference)->Apply(inference_sizes)->Unit(benchmark::kMillisecond)->MinTime(0.2);
BENCHMARK(BM_DecodeAt)->ArgsProduct({{1, 2}, {1024, 16384}})->Unit(benchmark::kMicrosecond)->MinTime(0.2);

BENCHMARK_MAIN();
