// The fused selective scan (mixlab/scan/selective_scan.h) against the two plain-LibTorch
// ways of computing the same recurrence, in the same run, 1 intra-op thread:
//   BM_Scan/<path>/<T>/<backward>   path: fused | loop | order1
//     fused   selective_scan
//     loop    selective_scan_reference: exp(Δa) and Δb·u as (B,T,C,N) tensors, a loop over t
//     order1  the ssm mixer's former path: those tensors permuted to (B, C·N, T, 1) and run
//             through the order:1 resolvent op, then contracted with c
// Shapes: the compare model's ssm (B = 32, C = 64, N = 16), T = 64 / 256 / 1024; and
//   BM_ScanWide/fused/<fwd|fwd+bwd>/<T>  B = 4, C = 256 (4 heads of 64), N = 16, T = 1024 / 2048:
//     the shape of the published-reference comparison (issue 38), where a backward that kept
//     every state (T·N·C per row) ran out of cache.
// Figures and command: docs/log/benchmarks-2026-11.md ("Fused selective scan").
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "bench_setup.h"
#include "mixlab/resolvent/resolvent.h"
#include "mixlab/scan/selective_scan.h"

namespace {

using torch::Tensor;
constexpr int64_t kB = 32, kC = 64, kN = 16;

struct Inputs {
  Tensor u, delta, a, b, c, d;
};

Inputs make_inputs(int64_t T, bool grad, int64_t B = kB, int64_t C = kC) {
  torch::manual_seed(1);
  Inputs in{torch::randn({B, T, C}),
            torch::softplus(torch::randn({B, T, C})) * 0.1,
            -torch::exp(torch::randn({C, kN}) * 0.5),
            torch::randn({B, T, kN}),
            torch::randn({B, T, kN}),
            torch::randn({C})};
  if (grad)
    for (auto* t : {&in.u, &in.delta, &in.a, &in.b, &in.c, &in.d}) t->requires_grad_(true);
  return in;
}

Tensor run_order1(const Inputs& in) {
  const int64_t B = in.u.size(0), T = in.u.size(1), C = kC, N = kN;
  static const auto kOrder1 = mixlab::Pattern::parse("order:1");
  auto decay = torch::exp(in.delta.unsqueeze(-1) * in.a);
  auto input = in.delta.unsqueeze(-1) * in.b.unsqueeze(2);
  auto rows = [&](const Tensor& t) { return t.permute({0, 2, 3, 1}).reshape({B, C * N, T, 1}); };
  auto xs = in.u.transpose(1, 2).unsqueeze(2).expand({B, C, N, T}).reshape({B, C * N, T, 1});
  auto beta = rows(decay).narrow(3, 0, kOrder1.max_width(T));
  auto h = mixlab::resolvent_forward(rows(input), beta, xs, kOrder1);
  return (h.view({B, C, N, T}).permute({0, 3, 1, 2}) * in.c.unsqueeze(2)).sum(-1) + in.d * in.u;
}

Tensor run(const std::string& path, const Inputs& in) {
  if (path == "fused") return mixlab::selective_scan(in.u, in.delta, in.a, in.b, in.c, in.d);
  if (path == "loop") return mixlab::selective_scan_reference(in.u, in.delta, in.a, in.b, in.c, in.d);
  return run_order1(in);
}

void BM_Scan(benchmark::State& st, const std::string& path, bool backward) {
  const int64_t T = st.range(0);
  auto in = make_inputs(T, backward);
  for (auto _ : st) {
    if (backward) {
      run(path, in).sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(run(path, in));
    }
  }
  st.counters["tokens_per_s"] = benchmark::Counter(double(kB * T), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ScanWide(benchmark::State& st, bool backward) {
  const int64_t T = st.range(0), B = 4, C = 256;
  auto in = make_inputs(T, backward, B, C);
  for (auto _ : st) {
    if (backward) {
      run("fused", in).sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(run("fused", in));
    }
  }
  st.counters["tokens_per_s"] = benchmark::Counter(double(B * T), benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (bool backward : {false, true})
    benchmark::RegisterBenchmark((std::string("BM_ScanWide/fused/") + (backward ? "fwd+bwd" : "fwd")).c_str(),
                                 BM_ScanWide, backward)
        ->Arg(1024)
        ->Arg(2048)
        ->Unit(benchmark::kMillisecond);
  for (const std::string path : {"fused", "loop", "order1"})
    for (bool backward : {false, true})
      benchmark::RegisterBenchmark(("BM_Scan/" + path + (backward ? "/fwd+bwd" : "/fwd")).c_str(), BM_Scan, path,
                                   backward)
          ->Arg(64)
          ->Arg(256)
          ->Arg(1024)
          ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kOne);
  register_all();
  return mixlab::bench::run_benchmarks(argc, argv);
}
