// GPT-2 BPE encode throughput (bytes/s) on the Brown corpus, cold (a fresh tokeniser: every word
// is merged) and warm (the word cache holds the corpus's words). docs/log/benchmarks-2026-11.md (Tokeniser).
//
//   build/bench/bench_data --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <filesystem>

#include "mixlab/data/corpus.h"
#include "mixlab/data/gpt2_bpe.h"

namespace {

const std::string kRoot = MIXLAB_BENCH_SOURCE_DIR;

std::string corpus_text() {
  const std::string brown = kRoot + "/data/brown";
  const mixlab::Corpus c = mixlab::Corpus::load_brown(std::filesystem::exists(brown) ? brown : kRoot + "/data/sample");
  std::string text;
  for (auto split : {mixlab::Split::kTrain, mixlab::Split::kValidation})
    for (const auto& d : c.documents(split)) text += d.text + "\n";
  return text;
}

void encode(benchmark::State& state, bool warm) {
  static const std::string text = corpus_text();
  const mixlab::Gpt2Bpe warm_tokenizer = mixlab::Gpt2Bpe::load(kRoot + "/data/gpt2");
  if (warm) warm_tokenizer.encode(text);
  int64_t tokens = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const mixlab::Gpt2Bpe t = warm ? warm_tokenizer : mixlab::Gpt2Bpe::load(kRoot + "/data/gpt2");
    state.ResumeTiming();
    tokens = static_cast<int64_t>(t.encode(text).size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["bytes"] = static_cast<double>(text.size());
  state.counters["tokens"] = static_cast<double>(tokens);
}

BENCHMARK_CAPTURE(encode, cold, false)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(encode, warm, true)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
