// Benchmarks of the affine-recurrence layers (mixlab/scan/affine_mixer.h): forward and
// forward+backward time vs T for the chunked, recurrent and scan forms; decode time per token
// and decode state bytes; causal softmax attention (plain torch, same projections) as the
// quadratic baseline. Shapes: B = 1, C = 128, H = 2 (D = 64), chunk 64. BM_DiagBackwardChunks: the
// diagonal decay's backward kernel alone, by the chunks it walks, and its training forward on the
// same buffers (issue 38's backward / forward ratio).
// The slow forms are capped: recurrent T <= 4096, scan form T <= 1024, attention T <= 8192
// (its (T,T) scores: 8192^2 x 2 heads x 4 B = 512 MiB).
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../src/scan/affine_fused_kernels.h"
#include "bench_setup.h"
#include "mixlab/core/cpu_isa.h"
#include "mixlab/scan/affine_mixer.h"

namespace {

using mixlab::AffineForm;
using mixlab::AffineMember;
using mixlab::AffineMixer;

constexpr int64_t kB = 1, kC = 128, kH = 2;

std::shared_ptr<AffineMixer> make_layer(int64_t member, AffineForm form) {
  torch::manual_seed(0);
  mixlab::MixerDims dims;
  dims.d_model = kC;
  dims.n_heads = kH;
  auto layer = std::make_shared<AffineMixer>(static_cast<AffineMember>(member), dims, 64);
  layer->set_form(form);
  return layer;
}

// args: member, form, T, backward (0/1), composed (0/1: the LibTorch composition instead of the
// fused kernels, i.e. the layer as it ran before issue 17 item 2)
void BM_Layer(benchmark::State& state) {
  const int64_t member = state.range(0), T = state.range(2);
  const auto form = static_cast<AffineForm>(state.range(1));
  const bool backward = state.range(3) != 0, composed = state.range(4) != 0;
  std::optional<mixlab::ComposedAffineGuard> guard;
  if (composed) guard.emplace();
  auto layer = make_layer(member, form);
  auto x = torch::randn({kB, T, kC});
  if (backward) x.requires_grad_(true);
  for (auto _ : state) {
    if (backward) {
      auto y = layer->forward(x);
      y.sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(layer->forward(x));
    }
  }
  state.SetLabel(std::string(mixlab::affine_members()[static_cast<size_t>(member)].name) +
                 (form == AffineForm::kChunked     ? "/chunked"
                  : form == AffineForm::kRecurrent ? "/recurrent"
                                                   : "/scan") +
                 (backward ? "/fwd+bwd" : "/fwd") + (composed ? "/composed" : ""));
}

void LayerArgs(benchmark::internal::Benchmark* b) {
  for (int64_t m = 0; m < static_cast<int64_t>(AffineMember::kCount); ++m)
    for (int64_t bw : {0, 1}) {
      for (int64_t T : {256, 1024, 4096, 16384}) b->Args({m, static_cast<int64_t>(AffineForm::kChunked), T, bw, 0});
      for (int64_t T : {1024, 4096}) b->Args({m, static_cast<int64_t>(AffineForm::kChunked), T, bw, 1});
      for (int64_t T : {256, 1024, 4096}) b->Args({m, static_cast<int64_t>(AffineForm::kRecurrent), T, bw, 0});
      for (int64_t T : {256, 1024}) b->Args({m, static_cast<int64_t>(AffineForm::kScan), T, bw, 0});
    }
}
BENCHMARK(BM_Layer)->Apply(LayerArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// The kernels alone (no projections): args kernel (0 diag scalar gate, 1 diag per-key gate,
// 2 delta rule gated), form (0 chunked, 1 recurrent), T, backward, chunk. B = 1, H = 2, Dk = Dv = 64.
void BM_Kernel(benchmark::State& state) {
  const int64_t kernel = state.range(0), T = state.range(2), H = kH, D = kC / kH;
  const bool chunked = state.range(1) == 0, backward = state.range(3) != 0, composed = state.range(5) != 0;
  torch::manual_seed(0);
  auto q = torch::randn({kB, H, T, D}), k = torch::randn({kB, H, T, D}) / 8, v = torch::randn({kB, H, T, D});
  auto g = kernel == 0 ? (-torch::rand({kB, H, T, 1})).expand({kB, H, T, D}) : -torch::rand({kB, H, T, D}) / 8;
  auto kn = k / k.norm(2, -1, true);
  auto beta = torch::rand({kB, H, T}), log_alpha = -torch::rand({kB, H, T}) / 8;
  std::vector<at::Tensor> leaves{q, k, v};
  if (backward)
    for (auto& t : leaves) t.requires_grad_(true);
  // Forward calls without gradients take the fused kernel; `composed` times the LibTorch
  // composition of the same form instead (what they ran before issue 17 item 2).
  std::optional<mixlab::ComposedAffineGuard> guard;
  if (composed) guard.emplace();
  for (auto _ : state) {
    torch::AutoGradMode mode(backward);
    mixlab::AffineResult r;
    if (kernel < 2) {
      r = chunked ? mixlab::diag_decay_chunked(q, k, v, g, {}, state.range(4))
                  : mixlab::diag_decay_recurrent(q, k, v, g);
    } else {
      auto kk = backward ? k / k.norm(2, -1, true) : kn;
      r = chunked ? mixlab::delta_rule_chunked(q, kk, v, beta, log_alpha, {}, state.range(4))
                  : mixlab::delta_rule_recurrent(q, kk, v, beta, log_alpha);
    }
    if (backward) r.out.sum().backward();
    benchmark::DoNotOptimize(r.out);
  }
  static const char* names[] = {"diag(scalar gate)", "diag(per-key gate)", "delta(gated)"};
  state.SetLabel(std::string(names[kernel]) + (chunked ? "/chunked" + std::to_string(state.range(4)) : "/recurrent") +
                 (backward   ? "/fwd+bwd"
                  : composed ? "/fwd composed"
                             : "/fwd fused"));
}
// Args: kernel, recurrent?, T, backward?, chunk, composed?
BENCHMARK(BM_Kernel)
    ->ArgsProduct({{0, 1, 2}, {0}, {1024, 4096}, {0, 1}, {32, 64}, {0}})
    ->ArgsProduct({{0, 1, 2}, {0}, {1024, 4096}, {0}, {64}, {1}})
    ->ArgsProduct({{0, 1, 2}, {1}, {1024, 4096}, {0, 1}, {0}, {0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The diagonal decay's backward kernel alone on raw rows, chunk by chunk from the forward's
// checkpoints as the library runs it, or over the whole sequence from one checkpoint (chunk 0: how
// it ran before 2026-11-29), in one binary on the same buffers, so that the two differ in the
// walk order only (affine_fused_kernels.h, checkpoint_every). args: gate (0 scalar, 1 per key), T,
// chunk (0: the whole sequence), pass (0 the backward; 1 the training forward that writes the
// checkpoints, on the same buffers: issue 38's backward / forward ratio from one binary). B H = 4
// heads of Dk = Dv = 64, float, one thread.
void BM_DiagBackwardChunks(benchmark::State& state) {
  namespace f = mixlab::detail::affine_fused;
  using Backward = void (*)(const f::DiagDecayGradRows<float>&);
  using Forward = void (*)(const f::DiagDecayRows<float>&);
#define MIXLAB_BENCH_DIAG(ns) std::pair<Forward, Backward>(f::ns::diag_decay, f::ns::diag_decay_backward)
  const auto [forward, backward] = MIXLAB_ISA_SELECT(mixlab::cpu_isa(), MIXLAB_BENCH_DIAG);
#undef MIXLAB_BENCH_DIAG
  const bool scalar = state.range(0) == 0, time_forward = state.range(3) != 0;
  const int64_t T = state.range(1), chunk = state.range(2) == 0 ? T : state.range(2), BH = 4, D = 64;
  const int64_t chunks = f::checkpoint_count(T, chunk), a_row = scalar ? 1 : D;
  torch::manual_seed(0);
  auto q = torch::randn({BH, T, D}) / 8, k = torch::randn({BH, T, D}) / 8, v = torch::randn({BH, T, D});
  auto a = torch::rand({BH, T, a_row}) * 0.1 + 0.9, grad_out = torch::randn({BH, T, D});
  auto out = torch::empty({BH, T, D}), state0 = torch::zeros({BH, D, D});
  // Checkpoints for the smallest chunk, whatever this row's: every row has the same buffers.
  auto checkpoints = torch::empty({BH, f::checkpoint_count(T, 16), D, D});
  auto dq = torch::empty({BH, T, D}), dk = torch::empty({BH, T, D}), dv = torch::empty({BH, T, D});
  auto dg = torch::empty({BH, T, a_row}), grad_state = torch::empty({BH, D, D});
  std::vector<float> P(D * D), dstate(D * D), running(D), lanes(D * 16);
  float* cp = checkpoints.data_ptr<float>();
  // state0 is the forward's in/out state: each timed forward starts from the previous one's end
  // (the same work; the decays keep it bounded).
  auto run_forward = [&] {
    for (int64_t bh = 0; bh < BH; ++bh)
      forward({q[bh].data_ptr<float>(), k[bh].data_ptr<float>(), v[bh].data_ptr<float>(), a[bh].data_ptr<float>(),
               scalar, out[bh].data_ptr<float>(), state0[bh].data_ptr<float>(), T, D, D, cp + bh * chunks * D * D,
               chunk});
  };
  run_forward();
  if (time_forward) {
    for (auto _ : state) {
      run_forward();
      benchmark::DoNotOptimize(out.data_ptr<float>());
    }
    state.SetLabel(std::string(scalar ? "scalar gate" : "per-key gate") + "/training forward, chunks of " +
                   std::to_string(chunk));
    return;
  }
  for (auto _ : state) {
    grad_state.zero_();
    for (int64_t bh = 0; bh < BH; ++bh)
      backward({q[bh].data_ptr<float>(),
                k[bh].data_ptr<float>(),
                v[bh].data_ptr<float>(),
                a[bh].data_ptr<float>(),
                scalar,
                cp + bh * chunks * D * D,
                chunk,
                grad_out[bh].data_ptr<float>(),
                grad_state[bh].data_ptr<float>(),
                dq[bh].data_ptr<float>(),
                dk[bh].data_ptr<float>(),
                dv[bh].data_ptr<float>(),
                dg[bh].data_ptr<float>(),
                P.data(),
                dstate.data(),
                running.data(),
                lanes.data(),
                T,
                D,
                D});
    benchmark::DoNotOptimize(dq.data_ptr<float>());
  }
  state.SetLabel(std::string(scalar ? "scalar gate" : "per-key gate") +
                 (state.range(2) == 0 ? "/whole sequence" : "/chunks of " + std::to_string(chunk)));
}
BENCHMARK(BM_DiagBackwardChunks)
    ->ArgsProduct({{0, 1}, {1024, 4096, 16384}, {0, 64, 256}, {0}})
    ->ArgsProduct({{0, 1}, {1024, 4096, 16384}, {256}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode: one step per iteration from a state that has seen 256 tokens.
void BM_Decode(benchmark::State& state) {
  auto layer = make_layer(state.range(0), AffineForm::kChunked);
  torch::NoGradGuard no_grad;
  auto st = layer->init_state(kB);
  auto x = torch::randn({kB, kC});
  for (int i = 0; i < 256; ++i) layer->step(*st, x);
  for (auto _ : state) benchmark::DoNotOptimize(layer->step(*st, x));
  state.counters["state_bytes"] = static_cast<double>(st->bytes());
  state.SetLabel(mixlab::affine_members()[static_cast<size_t>(state.range(0))].name);
}
BENCHMARK(BM_Decode)
    ->DenseRange(0, static_cast<int64_t>(AffineMember::kCount) - 1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Causal softmax attention with the same q,k,v,o projections, plain torch, (T,T) scores.
struct Attention {
  torch::nn::Linear q{kC, kC}, k{kC, kC}, v{kC, kC}, o{kC, kC};
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t T = x.size(1), D = kC / kH;
    auto heads = [&](const torch::Tensor& t) { return t.view({kB, T, kH, D}).transpose(1, 2); };
    auto s = torch::matmul(heads(q(x)), heads(k(x)).transpose(-1, -2)) / std::sqrt(double(D));
    auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    auto y = torch::matmul(torch::softmax(s.masked_fill(mask, -INFINITY), -1), heads(v(x)));
    return o(y.transpose(1, 2).reshape({kB, T, kC}));
  }
};

void BM_SoftmaxAttention(benchmark::State& state) {
  torch::manual_seed(0);
  Attention attn;
  const int64_t T = state.range(0);
  const bool backward = state.range(1) != 0;
  auto x = torch::randn({kB, T, kC});
  if (backward) x.requires_grad_(true);
  for (auto _ : state) {
    if (backward) {
      attn.forward(x).sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(attn.forward(x));
    }
  }
  state.SetLabel(backward ? "attention/fwd+bwd" : "attention/fwd");
}
BENCHMARK(BM_SoftmaxAttention)
    ->ArgsProduct({{256, 1024, 4096, 8192}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode of softmax attention at cache length 4096: one query row against the cache.
void BM_SoftmaxAttentionDecode(benchmark::State& state) {
  const int64_t n = state.range(0), D = kC / kH;
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  Attention attn;
  auto kc = torch::randn({kB, kH, n, D}), vc = torch::randn({kB, kH, n, D});
  auto x = torch::randn({kB, 1, kC});
  for (auto _ : state) {
    auto q = attn.q(x).view({kB, 1, kH, D}).transpose(1, 2);
    auto w = torch::softmax(torch::matmul(q, kc.transpose(-1, -2)) / std::sqrt(double(D)), -1);
    benchmark::DoNotOptimize(attn.o(torch::matmul(w, vc).transpose(1, 2).reshape({kB, 1, kC})));
  }
  state.counters["state_bytes"] = static_cast<double>(2 * kc.numel() * 4);
  state.SetLabel("attention decode (keys+values cache)");
}
BENCHMARK(BM_SoftmaxAttentionDecode)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // The block cache matters here: without it every call's fresh (B,H,T,D) tensors are
  // page-faulted in again, which at 1 thread was over half of the per-key gate's forward row at
  // T 4096 (4.1 against 1.9 ms with a scalar gate, 2026-11-29).
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kEnvOrAllCores);
  // MIXLAB_SCAN_PROFILE=<member index>: write a chrome trace of one chunked forward at T = 4096
  // to scan_profile.trace (op-level breakdown) instead of benchmarking.
  if (const char* m = std::getenv("MIXLAB_SCAN_PROFILE")) {
    auto layer = make_layer(std::atoi(m), AffineForm::kChunked);
    auto x = torch::randn({kB, 4096, kC});
    torch::NoGradGuard no_grad;
    layer->forward(x);
    torch::autograd::profiler::RecordProfile guard("scan_profile.trace");
    layer->forward(x);
    return 0;
  }
  return mixlab::bench::run_benchmarks(argc, argv);
}
