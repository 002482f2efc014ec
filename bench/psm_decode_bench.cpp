// T-PSM vs causal attention decode: time per token and state bytes against context (the analog of
// seed 004 Fig. 6). Not a Google Benchmark loop: the state is grown ONCE by step() from 0 to the
// largest context, and at each context in the list a window of `--window` more steps is timed, so
// the whole sweep costs one prefill (attention's prefill to 64k is quadratic and dominates).
//
//   bench_psm_decode [--max 65536] [--window 256] [--d 64] [--heads 4] [--tpsm tpsm:c=16]
// Prints one row per (mixer, context): mean and worst wall µs per token over the window (T-PSM's
// mean includes its amortised Agg carries), and the state bytes at the start of the window.
#include <benchmark/benchmark.h>  // linked by bench/CMakeLists.txt; only DoNotOptimize is used
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_setup.h"
#include "mixlab/registry/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string mixer;
  int64_t context;
  double mean_us, worst_us;
  int64_t bytes;
};

std::vector<Row> sweep(const std::string& spec, const mixlab::MixerDims& dims, int64_t max_ctx, int64_t window) {
  torch::manual_seed(0);
  auto mixer = mixlab::mixer_create(spec, dims);
  mixer->eval();
  torch::NoGradGuard no_grad;
  auto state = mixer->init_state(1);
  std::vector<Row> rows;
  int64_t pos = 0;
  for (int64_t ctx = 1024; ctx <= max_ctx; ctx *= 2) {
    while (pos < ctx) {
      benchmark::DoNotOptimize(mixer->step(*state, torch::randn({1, dims.d_model})));
      ++pos;
    }
    const int64_t bytes = state->bytes();
    double total = 0, worst = 0;
    for (int64_t i = 0; i < window; ++i) {
      auto x = torch::randn({1, dims.d_model});
      const auto t0 = Clock::now();
      auto y = mixer->step(*state, x);
      benchmark::DoNotOptimize(y.data_ptr());
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      total += us;
      worst = std::max(worst, us);
      ++pos;
    }
    rows.push_back({mixer->spec(), ctx, total / static_cast<double>(window), worst, bytes});
    std::fprintf(stderr, "%s ctx %lld done\n", spec.c_str(), static_cast<long long>(ctx));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_ctx = 65536, window = 256, d = 64, heads = 4;
  std::string tpsm = "tpsm:c=16", attention = "attention";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--max")
      max_ctx = std::stoll(v);
    else if (k == "--window")
      window = std::stoll(v);
    else if (k == "--d")
      d = std::stoll(v);
    else if (k == "--heads")
      heads = std::stoll(v);
    else if (k == "--tpsm")
      tpsm = v;
    else if (k == "--attention")
      attention = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  // One core; without the block cache attention's mean µs per token was 1.2-3.3x (its growing
  // key/value cache page-faulted in again). Not a Google Benchmark run: the table says both.
  const auto setup = mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kOne);
  std::printf("Threads %d, CPU block cache %s.\n\n", setup.threads, setup.block_cache ? "on" : "off");
  mixlab::MixerDims dims;
  dims.d_model = d;
  dims.n_heads = heads;
  dims.max_len = max_ctx + window + 1;
  std::printf("| mixer | context | mean µs/token | worst µs/token | state bytes |\n|---|---|---|---|---|\n");
  for (const auto& spec : {tpsm, attention}) {
    for (const auto& r : sweep(spec, dims, max_ctx, window))
      std::printf("| %s | %lld | %.1f | %.1f | %lld |\n", r.mixer.c_str(), static_cast<long long>(r.context), r.mean_us,
                  r.worst_us, static_cast<long long>(r.bytes));
    std::fflush(stdout);
  }
  return 0;
}
