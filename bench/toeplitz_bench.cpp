// Toeplitz mixing benchmarks: FFT (native kernel, and LibTorch's rfft/irfft under
// ComposedToeplitzFftGuard: "FftComposed") vs materialised paths (forward, forward+backward),
// Toeplitz vs dense causal softmax attention (forward), ToeplitzMixer decode time per token vs
// context. The CPU block cache is installed, as in the CLI (a fresh page costs ~3.8 ms/MiB here).
// Report ratios of medians taken in the same run (docs/log/benchmarks-2026-11.md (Toeplitz section)).
//
//   MIXLAB_THREADS=1 build-toeplitz/bench/bench_toeplitz --benchmark_repetitions=3 \
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>
#include <optional>

#include "bench_setup.h"
#include "mixlab/toeplitz/toeplitz.h"
#include "mixlab/toeplitz/toeplitz_mixer.h"

namespace {

// One shape for every op benchmark: (B,H,T,D) = (1,2,T,32). The materialised path and attention
// hold (H,T,T) float tensors (512 MiB at T = 8192), so they stop at 8192 on this shared machine.
constexpr int64_t kB = 1, kH = 2, kD = 32;

void run_op(benchmark::State& state, mixlab::ToeplitzPath path, bool backward, bool composed = false) {
  const int64_t T = state.range(0);
  std::optional<mixlab::ComposedToeplitzFftGuard> guard;
  if (composed) guard.emplace();
  torch::manual_seed(0);
  auto t = (torch::randn({kH, T}) / std::sqrt(static_cast<double>(T))).requires_grad_(backward);
  auto x = torch::randn({kB, kH, T, kD}).requires_grad_(backward);
  auto bias = torch::randn({kH, T}).requires_grad_(backward);
  for (auto _ : state) {
    if (backward) {
      auto y = mixlab::toeplitz_forward(t, x, bias, path);
      y.sum().backward();
      benchmark::DoNotOptimize(t.grad().data_ptr());
    } else {
      torch::NoGradGuard no_grad;
      auto y = mixlab::toeplitz_forward(t, x, bias, path);
      benchmark::DoNotOptimize(y.data_ptr());
    }
  }
  state.counters["T"] = static_cast<double>(T);
}

void BM_FftForward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kFft, false); }
void BM_MaterializedForward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kMaterialized, false); }
void BM_FftForwardBackward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kFft, true); }
void BM_FftComposedForward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kFft, false, true); }
void BM_FftComposedForwardBackward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kFft, true, true); }
void BM_MaterializedForwardBackward(benchmark::State& s) { run_op(s, mixlab::ToeplitzPath::kMaterialized, true); }

// Dense causal softmax attention in plain torch, the same (B,H,T,D): QK^T, mask, softmax, matmul.
void BM_AttentionForward(benchmark::State& state) {
  const int64_t T = state.range(0);
  torch::manual_seed(0);
  auto q = torch::randn({kB, kH, T, kD}), k = torch::randn({kB, kH, T, kD}), v = torch::randn({kB, kH, T, kD});
  auto mask = torch::ones({T, T}, torch::kBool).triu(1);  // true above the diagonal (future)
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(kD));
    scores.masked_fill_(mask, -std::numeric_limits<float>::infinity());
    auto y = torch::matmul(torch::softmax(scores, -1), v);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["T"] = static_cast<double>(T);
}

// ToeplitzMixer decode: C = 64, H = 2, K = 1, B = 1; the state is prefilled to `context` tokens
// (untimed), then each timed iteration decodes one more token.
void BM_MixerDecode(benchmark::State& state) {
  const int64_t context = state.range(0);
  mixlab::MixerDims dims;
  dims.d_model = 64;
  dims.n_heads = 2;
  dims.max_len = context + 4096;
  mixlab::ToeplitzMixer mixer("heads=2:kernel=1", dims);
  torch::NoGradGuard no_grad;
  auto st = mixer.init_state(1);
  auto x = torch::randn({1, 64});
  for (int64_t i = 0; i < context; ++i) mixer.step(*st, x);
  for (auto _ : state) {
    auto y = mixer.step(*st, x);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["context"] = static_cast<double>(context);
  state.counters["state_MiB"] = static_cast<double>(st->bytes()) / (1 << 20);
}

}  // namespace

BENCHMARK(BM_FftForward)->RangeMultiplier(2)->Range(32, 16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FftComposedForward)->RangeMultiplier(2)->Range(32, 16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FftComposedForwardBackward)->RangeMultiplier(2)->Range(32, 16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaterializedForward)->RangeMultiplier(2)->Range(32, 8192)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FftForwardBackward)->RangeMultiplier(2)->Range(32, 16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaterializedForwardBackward)->RangeMultiplier(2)->Range(32, 8192)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionForward)->RangeMultiplier(2)->Range(128, 8192)->Unit(benchmark::kMillisecond);
// 256 timed steps: the context grows by 256 during one measurement (the figure is their mean).
BENCHMARK(BM_MixerDecode)->RangeMultiplier(4)->Range(128, 16384)->Iterations(256)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kEnvOrAllCores);
  return mixlab::bench::run_benchmarks(argc, argv);
}
