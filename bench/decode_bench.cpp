// Decode of the 2-layer d = 64 compare model (vocab 256, byte-level LM size), every registered
// mixer: time per token and state bytes against context (analogs of seed 004 Fig. 6 and seed 001
// Table 7). Each benchmark is one (mixer, path, context): the model's state is grown ONCE per
// mixer with chunked prefill (DecoderModel::prefill) to each context in increasing order; the
// `fast` path then steps that state, the `step` path a fork of it (ordinary tensors, as the
// reference path needs), so both paths are timed at the same context in the same run. The
// context drifts by the timed iterations (200), small against 1k.
//
//   bench_decode [--max_context=65536] [--mixers=gla,retnet] [--paths=fast,step] [--plot=PREFIX]
//                + benchmark flags
// Paths: `fast` = DecoderModel::step (the decode path: InferenceMode, preallocated buffers);
// `step` = the plain per-block path with autograd off only (NoGradGuard), kept as the baseline
// (DecoderModel::step_reference). Counters: us_per_token (wall, 1 thread), state_bytes (measured by
// DecoderState::bytes()), context.
// --plot=PREFIX also draws what this run measured: PREFIX_latency.png (CPU us/token against
// context) and PREFIX_state.png (state bytes against context), log-log, one line per mixer (per
// mixer and path when several paths ran). It reads the reported runs, so it prints the console
// format whatever --benchmark_format says (--benchmark_out still writes its file).
// Mixers whose decode is O(n) per token (attention, toeplitz, resolvent:dense/causal) are capped at
// 4k context: their step-by-step prefill costs minutes beyond that on the shared machine.
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_setup.h"
#include "mixlab/analysis/line_chart.h"
#include "mixlab/core/error.h"
#include "mixlab/model/model.h"
#include "mixlab/registry/registry.h"

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
    const mixlab::ModelDims dims = bench_dims(max_len);
    g.model = std::make_shared<mixlab::DecoderModel>(dims, mixlab::mixer_factory_from_spec(spec, dims.layers));
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

// What --plot draws: one measured point per benchmark, found by the benchmark's registered name.
struct Measured {
  std::string series;  // legend entry: the spec, or "spec (path)" when several paths ran
  double context = 0, us_per_token = 0, state_bytes = 0;
};

// The console display that also keeps each run's finished counters. us_per_token is a rate
// counter, final only once Google Benchmark has divided by the CPU time, i.e. in the report, not
// inside the benchmark function.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  explicit CollectingReporter(std::map<std::string, Measured>* points)
      : benchmark::ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Color : OO_None), points_(points) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      auto it = points_->find(r.run_name.function_name);
      if (r.error_occurred || r.run_type != Run::RT_Iteration || it == points_->end()) continue;
      it->second.context = r.counters.at("context").value;
      it->second.us_per_token = r.counters.at("us_per_token").value;
      it->second.state_bytes = r.counters.at("state_bytes").value;
    }
    benchmark::ConsoleReporter::ReportRuns(runs);
  }

 private:
  std::map<std::string, Measured>* points_;
};

// One series per legend entry in first-registered order, points in increasing context (the order
// each mixer's contexts are registered in).
void write_plots(const std::vector<std::string>& names, const std::map<std::string, Measured>& points,
                 const std::string& prefix) {
  mixlab::LineChart latency, state;
  latency.title = "Decode: CPU time per token against context (2-layer d = 64 model, 1 thread)";
  latency.y_label = "CPU µs per token";
  state.title = "Decode: state bytes against context (2-layer d = 64 model)";
  state.y_label = "decode state (bytes)";
  for (mixlab::LineChart* c : {&latency, &state}) {
    c->x_label = "context (tokens; 1Ki = 1024)";
    c->log_x = c->log_y = true;
  }
  for (const auto& name : names) {
    const Measured& m = points.at(name);
    if (m.context <= 0) continue;  // filtered out or failed: nothing measured
    auto add = [&](mixlab::LineChart& c, double y) {
      auto s = std::find_if(c.series.begin(), c.series.end(), [&](const auto& l) { return l.label == m.series; });
      if (s == c.series.end()) s = c.series.insert(s, {m.series, {}, {}});
      s->x.push_back(m.context);
      s->y.push_back(y);
    };
    add(latency, m.us_per_token);
    add(state, m.state_bytes);
  }
  mixlab::line_chart_png(latency, prefix + "_latency.png");
  mixlab::line_chart_png(state, prefix + "_state.png");
  std::printf("wrote %s_latency.png and %s_state.png\n", prefix.c_str(), prefix.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_context = 65536;
  std::vector<std::string> specs = default_specs(), paths = {"fast", "step"};
  std::string plot_prefix;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max_context=", 14) == 0) {
      max_context = std::stoll(argv[i] + 14);
    } else if (std::strncmp(argv[i], "--mixers=", 9) == 0) {
      specs = split(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--paths=", 8) == 0) {
      paths = split(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--plot=", 7) == 0) {
      plot_prefix = argv[i] + 7;
    } else {
      rest.push_back(argv[i]);
    }
  }
  // One token at a time on one core; without the block cache attention's growing key/value cache
  // was page-faulted in again at each growth (up to 1.6x on this bench's attention rows).
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kOne);
  const int64_t max_len = max_context + 4096;  // room for the timed iterations
  std::vector<std::string> names;              // registration order: mixers, then context, then path
  std::map<std::string, Measured> points;
  for (const auto& spec : specs) {
    const int64_t cap = linear_cost(spec) ? std::min<int64_t>(max_context, 4096) : max_context;
    for (int64_t ctx = 1024; ctx <= cap; ctx *= 4) {
      for (const auto& path : paths) {
        const std::string name = "decode/" + spec + "/" + path + "/" + std::to_string(ctx);
        names.push_back(name);
        points[name].series = paths.size() > 1 ? spec + " (" + path + ")" : spec;
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& st) { bm_decode(st, spec, path, ctx, max_len); })
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(200)
            ->Repetitions(1);
      }
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (plot_prefix.empty()) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    CollectingReporter reporter(&points);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  }
  benchmark::Shutdown();
  if (!plot_prefix.empty()) {
    try {
      write_plots(names, points, plot_prefix);
    } catch (const mixlab::Error& e) {
      std::fprintf(stderr, "bench_decode: --plot: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
