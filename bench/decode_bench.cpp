// Decode of the 2-layer d = 64 compare model (vocab 256, byte-level LM size), every registered
// mixer: time per token and state bytes against context (analogs of seed 004 Fig. 6 and seed 001
// Table 7). Each benchmark is one (mixer, path, context): the model's state is grown ONCE per
// mixer with chunked prefill (DecoderModel::prefill) to each context in increasing order; the
// `fast` path then steps that state, the `step` path a fork of it (ordinary tensors, as the
// reference path needs), so both paths are timed at the same context in the same run. The
// context drifts by the timed iterations (200), small against 1k.
//
//   bench_decode [--max_context=65536] [--mixers=gla,retnet] [--paths=fast,step] + benchmark flags
// Paths: `fast` = DecoderModel::step (the decode path: InferenceMode, preallocated buffers);
// `step` = the plain per-block path with autograd off only (NoGradGuard), kept as the baseline
// (DecoderModel::step_reference). Counters: us_per_token (wall, 1 thread), state_bytes (measured by
// DecoderState::bytes()), context.
// Mixers whose decode is O(n) per token (attention, toeplitz, resolvent:dense/causal) are capped at
// 4k context: their step-by-step prefill costs minutes beyond that on the shared machine.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "mixlab/core/threads.h"
#include "mixlab/mixers/registry.h"
#include "mixlab/model/model.h"

namespace {

struct Grown {
  std::shared_ptr<mixlab::DecoderModel> model;
  mixlab::DecoderState state;
};

std::map<std::string, Grown> g_grown;  // key: spec

mixlab::ModelDims bench_dims(int64_t max_len) {
  mixlab::ModelDims d;
  d.vocab = 256;
  d.d_model = 64;
  d.layers = 2;
  d.heads = 4;
  d.mlp_ratio = 4;
  d.max_len = max_len;
  return d;
}

bool linear_cost(const std::string& spec) {
  return spec == "attention" || spec.rfind("toeplitz", 0) == 0 || spec == "resolvent:dense" ||
         spec == "resolvent:causal";
}

void grow(Grown& g, int64_t context) {
  const int64_t chunk = 512;
  torch::NoGradGuard no_grad;
  while (g.state.position < context) {
    const int64_t n = std::min(chunk, context - g.state.position);
    g.model->prefill(g.state, torch::randint(0, 256, {1, n}, torch::kLong));
  }
}

void bm_decode(benchmark::State& st, const std::string& spec, const std::string& path, int64_t context,
               int64_t max_len) {
  const std::string& key = spec;
  auto it = g_grown.find(key);
  if (it == g_grown.end()) {
    torch::manual_seed(0);
    Grown g;
    g.model = std::make_shared<mixlab::DecoderModel>(bench_dims(max_len), mixlab::mixer_factory_from_spec(spec));
    g.model->eval();
    g.state = g.model->init_state(1);
    it = g_grown.emplace(key, std::move(g)).first;
  }
  Grown& g = it->second;
  grow(g, context);
  auto tok = torch::randint(0, 256, {1}, torch::kLong);
  torch::NoGradGuard no_grad;
  const bool fast = path == "fast";
  mixlab::DecoderState forked;
  if (!fast) forked = g.model->fork(g.state);
  mixlab::DecoderState& s = fast ? g.state : forked;
  int64_t tokens = 0;
  for (auto _ : st) {
    auto logits = fast ? g.model->step(s, tok) : g.model->step_reference(s, tok);
    benchmark::DoNotOptimize(logits.data_ptr());
    ++tokens;
  }
  st.counters["us_per_token"] =
      benchmark::Counter(static_cast<double>(tokens) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  st.counters["state_bytes"] = static_cast<double>(s.bytes());
  st.counters["context"] = static_cast<double>(context);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// One spec per registered family, at its defaults (resolvent needs a pattern: the cache-efficient
// pow2+cache of seed 000).
std::vector<std::string> default_specs() {
  std::vector<std::string> specs;
  for (const auto& f : mixlab::mixer_families())
    specs.push_back(f.family == "resolvent" ? "resolvent:pow2+cache" : f.family);
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_context = 65536;
  std::vector<std::string> specs = default_specs(), paths = {"fast", "step"};
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max_context=", 14) == 0) {
      max_context = std::stoll(argv[i] + 14);
    } else if (std::strncmp(argv[i], "--mixers=", 9) == 0) {
      specs = split(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--paths=", 8) == 0) {
      paths = split(argv[i] + 8);
    } else {
      rest.push_back(argv[i]);
    }
  }
  mixlab::threads_configure(1);
  const int64_t max_len = max_context + 4096;  // room for the timed iterations
  for (const auto& spec : specs) {
    const int64_t cap = linear_cost(spec) ? std::min<int64_t>(max_context, 4096) : max_context;
    for (int64_t ctx = 1024; ctx <= cap; ctx *= 4) {
      for (const auto& path : paths) {
        benchmark::RegisterBenchmark(("decode/" + spec + "/" + path + "/" + std::to_string(ctx)).c_str(),
                                     [=](benchmark::State& st) { bm_decode(st, spec, path, ctx, max_len); })
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(200)
            ->Repetitions(1);
      }
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
