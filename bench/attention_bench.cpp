// The attention layer (mixlab/attention/attention.h) against the plain-LibTorch layer a user
// writes, in the same run: BM_Layer/<T>/<backward>/<form>, form 0 = mixlab's AttentionMixer
// (causal_attention's native kernel), 1 = the same mixer under ComposedAttentionGuard (its LibTorch
// form, as before the native kernel), 2 = plain LibTorch: the same fused qkv and output
// projections, (T,T) scores, -inf above the diagonal, softmax, product. The plain layer has no
// RoPE (mixlab's does): mixlab does a little more work. B = 1, C = 128, H = 2 (D = 64), float32.
// BM_SmallHeads/<window>/<form>: forward + backward at MAD's model (B 32, T 64, C 128, H 16: D 8,
// which the native kernel takes in half-width vectors since 2026-11-29; before, the layer ran the
// composed form, and local:8 unfolded windows), full attention (window 0) and local:8.
// The CPU block cache is installed for all three (a fresh page costs ~3.8 ms/MiB on the VM of
// docs/log/benchmarks-2026-11.md; the (T,T) tensors of the plain layer would measure mostly page faults).
//
//   MIXLAB_THREADS=1 ./build/bench/bench_attention --benchmark_min_time=0.3
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>
#include <optional>

#include "bench_setup.h"
#include "mixlab/attention/attention.h"
#include "mixlab/attention/causal_attention.h"

namespace {

constexpr int64_t kB = 1, kC = 128, kH = 2;

// window > 0: the band of local:W as well (keys i - W .. i).
struct PlainLayer {
  int64_t C, H, window;
  torch::nn::Linear qkv{torch::nn::LinearOptions(C, 3 * C).bias(false)};
  torch::nn::Linear out{torch::nn::LinearOptions(C, C).bias(false)};
  PlainLayer(int64_t c, int64_t h, int64_t w = 0) : C(c), H(h), window(w) {}
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t B = x.size(0), T = x.size(1), D = C / H;
    auto p = qkv(x).view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});  // (3,B,H,T,D)
    auto s = torch::matmul(p[0], p[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(D));
    auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    if (window > 0) mask = mask.logical_or(torch::ones({T, T}, torch::kBool).tril(-window - 1));
    auto y = torch::matmul(torch::softmax(s.masked_fill(mask, -INFINITY), -1), p[2]);
    return out(y.transpose(1, 2).reshape({B, T, C}));
  }
};

void BM_Layer(benchmark::State& state) {
  const int64_t T = state.range(0), form = state.range(2);
  const bool backward = state.range(1) != 0;
  torch::manual_seed(0);
  mixlab::MixerDims dims;
  dims.d_model = kC;
  dims.n_heads = kH;
  dims.max_len = T;
  mixlab::AttentionMixer mixer(dims);
  PlainLayer plain(kC, kH);
  std::optional<mixlab::ComposedAttentionGuard> guard;
  if (form == 1) guard.emplace();
  auto x = torch::randn({kB, T, kC}).requires_grad_(backward);
  auto run = [&] { return form == 2 ? plain.forward(x) : mixer.forward(x); };
  for (auto _ : state) {
    if (backward) {
      run().sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(run());
    }
  }
  state.SetLabel(form == 0 ? "mixlab" : form == 1 ? "mixlab composed" : "plain torch");
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(kB * T), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Layer)->ArgsProduct({{1024, 4096, 8192}, {0, 1}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SmallHeads(benchmark::State& state) {
  constexpr int64_t B = 32, T = 64, C = 128, H = 16;
  const int64_t window = state.range(0), form = state.range(1);
  torch::manual_seed(0);
  mixlab::MixerDims dims;
  dims.d_model = C;
  dims.n_heads = H;
  dims.max_len = T;
  mixlab::AttentionMixer mixer(dims, window);
  PlainLayer plain(C, H, window);
  std::optional<mixlab::ComposedAttentionGuard> guard;
  if (form == 1) guard.emplace();
  auto x = torch::randn({B, T, C}).requires_grad_(true);
  for (auto _ : state) (form == 2 ? plain.forward(x) : mixer.forward(x)).sum().backward();
  state.SetLabel(form == 0 ? "mixlab" : form == 1 ? "mixlab composed" : "plain torch");
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(B * T), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SmallHeads)->ArgsProduct({{0, 8}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kEnvOrAllCores);
  return mixlab::bench::run_benchmarks(argc, argv);
}
