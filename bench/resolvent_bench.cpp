// Benchmarks of the resolvent op (mixlab/resolvent/resolvent.h) against the dense-solve
// reference in the same run, decode per token with cache bytes, and a large-copy memory
// bandwidth baseline. Figures and the command line: docs/log/benchmarks-2026-11.md (resolvent section).
//
// Families (use --benchmark_filter):
//   BM_OpForward/<pattern>/<T>         resolvent_forward, B=1 H=4 D=64, float32
//   BM_OpForwardBackward/<pattern>/<T> forward + backward (all gradients)
//   BM_RefForward/<pattern>/<T>        dense A, B and torch::linalg_solve_triangular (T <= 1024,
//                                      and pow2, dense and causal at 4096)
//   BM_OpForwardBackwardGated(Rows)?/dense/<T>  the gated form (the mixer's default), both kernels
//   BM_OpForward(Backward)?Rows/<pattern>/<T>  where the block solve applies, with it off: the
//                                      row kernel, for the before/after in one run (the op's
//                                      label says which kernel ran: blocks or rows)
//   BM_OpForwardPlain/<pattern>/<T>    resolvent_forward under ResolventPlainLoopsGuard: the plain
//                                      row / blocked loops the register kernels replaced (D = 64)
//   BM_RefForwardBackward/<pattern>/<T>
//   BM_OpForwardH1 / BM_RefForwardH1   pow2 at T = 16384 with H = 1 (the reference needs 1 GiB
//                                      per T×T float matrix per head)
//   BM_Decode/<pattern>/<context>      resolvent_step per token at context 1k / 8k / 64k
//   BM_MemoryCopy                      memcpy of 256 MiB: the machine's copy bandwidth
//   BM_TensorFill64MiB                 a fresh 64 MiB tensor filled: the cost of first-touch pages
// Threads: LibTorch's default (1 on the project machine), or MIXLAB_THREADS.
//   BM_PatternAttention/<pattern>/<B>/<T>/<D>/<plain>  pattern_attention forward + backward, its
//                                      vector loops or (plain 1) its plain loops
//   BM_Layer/<pattern>/<T>/<bwd>/<composed>  the whole ResolventMixer (B=1, C=128, H=2, D=64,
//                                      RoPE, gated): forward (bwd 0) or forward+backward (1);
//                                      composed 1 = RoPE, scores and softmax as the separate
//                                      ops they were before the fused pattern_attention
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "bench_setup.h"
#include "mixlab/resolvent/pattern_attention.h"
#include "mixlab/resolvent/resolvent.h"
#include "mixlab/resolvent/resolvent_mixer.h"

namespace {

using mixlab::Pattern;
using torch::Tensor;

const std::vector<std::string> kPatterns = {"dense",  "causal",     "band:64",      "band:256", "pow2",
                                            "square", "pow2+cache", "square+cache", "order:1"};
// Patterns that read every earlier row: O(T²) for the op too, so they stop at 4096.
bool quadratic(const std::string& spec) { return spec == "dense" || spec == "causal"; }
constexpr int64_t kD = 64;

struct Inputs {
  Tensor alpha, beta, x;
  int64_t nnz = 0;  // sum over rows of |P(i)| + 1
};

Inputs make_inputs(const Pattern& p, int64_t H, int64_t T, bool grad) {
  torch::manual_seed(1);
  auto idx = mixlab::pattern_index(p, T);
  Inputs in;
  in.alpha = torch::softmax(torch::randn({1, H, T, idx->W + 1}), -1);
  in.beta = torch::rand({1, H, T, p.recurrent() ? idx->W : 0}) * (0.9 / std::max<int64_t>(idx->W, 1));
  in.x = torch::randn({1, H, T, kD});
  if (grad) {
    in.alpha.requires_grad_(true);
    in.beta.requires_grad_(true);
    in.x.requires_grad_(true);
  }
  in.nnz = idx->nnz() + T;
  return in;
}

// Bytes the op must at least stream per head: each non-zero reads one x row and one y row of D
// floats (the gathers), plus writing y.
double op_bytes(const Inputs& in, int64_t H, int64_t T) {
  return double(H) * (double(in.nnz) * 2 * kD * sizeof(float) + double(T) * kD * sizeof(float));
}

void set_common(benchmark::State& st, const Inputs& in, int64_t H, int64_t T, double saved_bytes) {
  st.counters["nnz_per_head"] = double(in.nnz);
  st.counters["bytes_per_second"] =
      benchmark::Counter(op_bytes(in, H, T) * double(st.iterations()), benchmark::Counter::kIsRate);
  // The bytes a forward must move at least (issue 17's "real bytes"): x, alpha, beta read once, y
  // written once, the same set as saved_bytes (the gathers that hit cache are not counted).
  st.counters["real_bytes_per_second"] =
      benchmark::Counter(saved_bytes * double(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["saved_MiB"] = saved_bytes / (1 << 20);
}

double op_saved_bytes(const Inputs& in) {
  // Forward output y plus what backward keeps: alpha, beta, x, y (contiguous).
  return double(mixlab::tensor_bytes(in.alpha) + mixlab::tensor_bytes(in.beta) + 2 * mixlab::tensor_bytes(in.x));
}

// Which kernel resolvent_forward takes: "blocks" (the BLAS-3 block solve of dense windows) or
// "rows"; the *Rows families turn the block solve off to time the row kernel in the same run.
void set_kernel_label(benchmark::State& st, const Pattern& p, int64_t T) {
  st.SetLabel(mixlab::resolvent_uses_dense_blocks(p, T) ? "blocks" : "rows");
}

// The block solve off (a min_width no pattern reaches) for one scope.
struct RowKernelOnly : mixlab::ResolventDenseBlocksScope {
  RowKernelOnly() : ResolventDenseBlocksScope({int64_t(1) << 40, mixlab::resolvent_dense_blocks().rows}) {}
};

void BM_OpForward(benchmark::State& st, const std::string& spec, int64_t H) {
  const int64_t T = st.range(0);
  auto p = Pattern::parse(spec);
  set_kernel_label(st, p, T);
  auto in = make_inputs(p, H, T, false);
  torch::NoGradGuard ng;
  for (auto _ : st) benchmark::DoNotOptimize(mixlab::resolvent_forward(in.alpha, in.beta, in.x, p));
  set_common(st, in, H, T, op_saved_bytes(in));
}

void BM_OpForwardBackward(benchmark::State& st, const std::string& spec) {
  const int64_t T = st.range(0), H = 4;
  auto p = Pattern::parse(spec);
  set_kernel_label(st, p, T);
  auto in = make_inputs(p, H, T, true);
  auto g = torch::randn({1, H, T, kD});
  for (auto _ : st) {
    auto y = mixlab::resolvent_forward(in.alpha, in.beta, in.x, p);
    auto grads = torch::autograd::grad({y}, {in.alpha, in.beta, in.x}, {g}, false, false, true);
    benchmark::DoNotOptimize(grads);
  }
  set_common(st, in, H, T, op_saved_bytes(in));
}

// The gated form (the ResolventMixer's default for recurrent patterns): gate (B,H,T,D) in (0,1).
void BM_OpForwardBackwardGated(benchmark::State& st, const std::string& spec) {
  const int64_t T = st.range(0), H = 4;
  auto p = Pattern::parse(spec);
  set_kernel_label(st, p, T);
  auto in = make_inputs(p, H, T, true);
  auto gate = torch::rand({1, H, T, kD}).requires_grad_(true);
  auto g = torch::randn({1, H, T, kD});
  for (auto _ : st) {
    auto y = mixlab::resolvent_forward(in.alpha, in.beta, in.x, p, gate);
    auto grads = torch::autograd::grad({y}, {in.alpha, in.beta, in.x, gate}, {g}, false, false, true);
    benchmark::DoNotOptimize(grads);
  }
  set_common(st, in, H, T, op_saved_bytes(in));
}

double ref_bytes(int64_t H, int64_t T) {
  // A, B, I − B, the identity: four (B,H,T,T) float matrices at least.
  return 4.0 * double(H) * double(T) * double(T) * sizeof(float);
}

void BM_RefForward(benchmark::State& st, const std::string& spec, int64_t H) {
  const int64_t T = st.range(0);
  auto p = Pattern::parse(spec);
  auto in = make_inputs(p, H, T, false);
  torch::NoGradGuard ng;
  for (auto _ : st) benchmark::DoNotOptimize(mixlab::resolvent_reference(in.alpha, in.beta, in.x, p));
  set_common(st, in, H, T, ref_bytes(H, T));
}

void BM_RefForwardBackward(benchmark::State& st, const std::string& spec) {
  const int64_t T = st.range(0), H = 4;
  auto p = Pattern::parse(spec);
  auto in = make_inputs(p, H, T, true);
  auto g = torch::randn({1, H, T, kD});
  for (auto _ : st) {
    auto y = mixlab::resolvent_reference(in.alpha, in.beta, in.x, p);
    auto grads = torch::autograd::grad({y}, {in.alpha, in.beta, in.x}, {g}, false, false, true);
    benchmark::DoNotOptimize(grads);
  }
  set_common(st, in, H, T, ref_bytes(H, T));
}

void BM_Decode(benchmark::State& st, const std::string& spec) {
  const int64_t ctx = st.range(0), H = 4;
  auto p = Pattern::parse(spec);
  mixlab::ResolventState state(p, 1, H, kD, torch::kFloat, {true, p.recurrent(), {}});
  // Patterns that keep every position: room for the context and the 64 timed steps, so no
  // doubling copy lands inside the timed loop (+cache states stay small on their own).
  if (!p.cache_efficient()) state.reserve(ctx + 64);
  // Fill the context in chunks (append copies rows; values do not matter for timing).
  for (int64_t t0 = 0; t0 < ctx; t0 += 4096) {
    const int64_t c = std::min<int64_t>(4096, ctx - t0);
    state.append(torch::randn({1, H, c, kD}), p.recurrent() ? torch::randn({1, H, c, kD}) : Tensor());
  }
  auto x = torch::randn({1, H, kD});
  torch::NoGradGuard ng;
  for (auto _ : st) {
    const int64_t c = p.row_size(state.position());
    auto a = torch::full({1, H, c + 1}, 1.0f / float(c + 1));
    auto b = torch::full({1, H, p.recurrent() ? c : 0}, 0.5f / float(std::max<int64_t>(c, 1)));
    benchmark::DoNotOptimize(mixlab::resolvent_step(state, a, b, x));
  }
  st.counters["cache_bytes"] = double(state.bytes());
  st.counters["cached_positions"] = double(state.cached_positions());
}

void BM_MemoryCopy(benchmark::State& st) {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 0);
  for (auto _ : st) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::ClobberMemory();
  }
  // Read + write traffic.
  st.counters["bytes_per_second"] =
      benchmark::Counter(2.0 * double(n) * double(st.iterations()), benchmark::Counter::kIsRate);
}

// A fresh 64 MiB tensor filled once per iteration: what every large output of an op costs before
// the op writes a byte of it (page faults), with and without the block cache (MIXLAB_CPU_CACHE_MB=0).
void BM_TensorFill64MiB(benchmark::State& st) {
  for (auto _ : st) benchmark::DoNotOptimize(torch::empty({16 << 20}).fill_(1.0f));
  st.counters["bytes_per_second"] =
      benchmark::Counter(double(64 << 20) * double(st.iterations()), benchmark::Counter::kIsRate);
}

// The layer at the affine layers' bench width (bench/scan_bench.cpp): B = 1, C = 128, H = 2.
void BM_Layer(benchmark::State& st, const std::string& spec) {
  const int64_t T = st.range(0);
  const bool backward = st.range(1) != 0, composed = st.range(2) != 0;
  std::optional<mixlab::ComposedPatternAttentionGuard> guard;
  if (composed) guard.emplace();
  torch::manual_seed(0);
  mixlab::MixerDims dims;
  dims.d_model = 128;
  dims.n_heads = 2;
  mixlab::ResolventMixer layer(spec, dims);
  auto x = torch::randn({1, T, dims.d_model});
  if (backward) x.requires_grad_(true);
  for (auto _ : st) {
    if (backward) {
      layer.forward(x).sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(layer.forward(x));
    }
  }
  st.SetLabel(std::string(backward ? "fwd+bwd" : "fwd") + (composed ? "/composed" : "/fused"));
}

// pattern_attention alone, forward + backward (q strided as the layer's projection view, RoPE,
// the diagonal), with its vector loops or (plain 1) its plain loops: compare's size (B 32, H 4,
// D 16, T 64) and a long row (B 1, H 4, D 64).
void BM_PatternAttention(benchmark::State& st, const std::string& spec) {
  const int64_t B = st.range(0), H = 4, T = st.range(1), D = st.range(2);
  std::optional<mixlab::PatternAttentionPlainLoopsGuard> plain;
  if (st.range(3) != 0) plain.emplace();
  torch::manual_seed(0);
  auto q = torch::randn({B, T, H, D}).permute({0, 2, 1, 3}).requires_grad_(true);
  auto k = torch::randn({B, H, T, D}).requires_grad_(true);
  const auto p = Pattern::parse(spec);
  for (auto _ : st) {
    auto a = mixlab::pattern_attention(q, k, p, true, 10000.0);
    a.probs.backward(torch::ones_like(a.probs));
  }
  st.SetLabel(plain ? "plain" : "vector");
}

int register_all() {
  for (const std::string spec : {"dense", "pow2", "square+cache"})
    for (const auto& size : std::vector<std::vector<int64_t>>{{32, 64, 16}, {1, 4096, 64}})
      for (int64_t plain : {0, 1}) {
        if (spec == "dense" && size[1] > 1024) continue;
        benchmark::RegisterBenchmark(("BM_PatternAttention/" + spec).c_str(),
                                     [spec](benchmark::State& s) { BM_PatternAttention(s, spec); })
            ->Args({size[0], size[1], size[2], plain})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
  for (const std::string spec : {"pow2", "pow2+cache", "square"})
    for (int64_t T : {1024, 4096})
      for (int64_t bwd : {0, 1})
        for (int64_t composed : {0, 1})
          benchmark::RegisterBenchmark(("BM_Layer/" + spec).c_str(), [spec](benchmark::State& s) { BM_Layer(s, spec); })
              ->Args({T, bwd, composed})
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
  const std::vector<int64_t> Ts = {256, 1024, 2048, 4096, 16384, 65536};
  for (const auto& spec : kPatterns) {
    for (auto T : Ts) {
      if (quadratic(spec) ? T > 4096 : T == 2048) continue;
      if (mixlab::resolvent_uses_dense_blocks(Pattern::parse(spec), T)) {
        benchmark::RegisterBenchmark(("BM_OpForwardRows/" + spec).c_str(),
                                     [spec](benchmark::State& s) {
                                       RowKernelOnly rows;
                                       BM_OpForward(s, spec, 4);
                                     })
            ->Arg(T)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("BM_OpForwardBackwardRows/" + spec).c_str(),
                                     [spec](benchmark::State& s) {
                                       RowKernelOnly rows;
                                       BM_OpForwardBackward(s, spec);
                                     })
            ->Arg(T)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark(("BM_OpForward/" + spec).c_str(),
                                   [spec](benchmark::State& s) { BM_OpForward(s, spec, 4); })
          ->Arg(T)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      if (!mixlab::resolvent_uses_dense_blocks(Pattern::parse(spec), T))
        benchmark::RegisterBenchmark(("BM_OpForwardPlain/" + spec).c_str(),
                                     [spec](benchmark::State& s) {
                                       mixlab::ResolventPlainLoopsGuard plain;
                                       BM_OpForward(s, spec, 4);
                                       s.SetLabel("plain");
                                     })
            ->Arg(T)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      benchmark::RegisterBenchmark(("BM_OpForwardBackward/" + spec).c_str(),
                                   [spec](benchmark::State& s) { BM_OpForwardBackward(s, spec); })
          ->Arg(T)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      // The reference is a dense T×T solve whatever the pattern (its cost does not depend on
      // it): every pattern up to 1024, pow2 and the quadratic ones at 4096 (2-4 s a call), none above.
      if (T <= 1024 || quadratic(spec) || (T == 4096 && spec == "pow2")) {
        benchmark::RegisterBenchmark(("BM_RefForward/" + spec).c_str(),
                                     [spec](benchmark::State& s) { BM_RefForward(s, spec, 4); })
            ->Arg(T)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("BM_RefForwardBackward/" + spec).c_str(),
                                     [spec](benchmark::State& s) { BM_RefForwardBackward(s, spec); })
            ->Arg(T)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  for (int64_t T : {256, 1024, 4096}) {
    benchmark::RegisterBenchmark("BM_OpForwardBackwardGated/dense",
                                 [](benchmark::State& s) { BM_OpForwardBackwardGated(s, "dense"); })
        ->Arg(T)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_OpForwardBackwardGatedRows/dense",
                                 [](benchmark::State& s) {
                                   RowKernelOnly rows;
                                   BM_OpForwardBackwardGated(s, "dense");
                                 })
        ->Arg(T)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("BM_OpForwardH1/pow2", [](benchmark::State& s) { BM_OpForward(s, "pow2", 1); })
      ->Arg(16384)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_RefForwardH1/pow2", [](benchmark::State& s) { BM_RefForward(s, "pow2", 1); })
      ->Arg(16384)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  for (const std::string spec : {"pow2+cache", "square+cache", "pow2", "dense"})
    for (int64_t ctx : {1024, 8192, 65536})
      benchmark::RegisterBenchmark(("BM_Decode/" + spec).c_str(), [spec](benchmark::State& s) { BM_Decode(s, spec); })
          ->Arg(ctx)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime()
          ->Iterations(64);
  benchmark::RegisterBenchmark("BM_TensorFill64MiB", BM_TensorFill64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_MemoryCopy", BM_MemoryCopy)->Unit(benchmark::kMillisecond)->UseRealTime();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // $MIXLAB_THREADS when set (scripts/bench.sh sets 2), else LibTorch's default (1 here).
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kEnvOrLibTorchDefault);
  register_all();
  return mixlab::bench::run_benchmarks(argc, argv);
}
