// GPT-2 BPE encode throughput (bytes/s) on the Brown corpus, cold (a fresh tokeniser: every word
// is merged) and warm (the word cache holds the corpus's words). docs/log/benchmarks-2026-11.md (Tokeniser).
// The lm task's streams: opening a nanoGPT token file of 10^8 tokens (a mapping, no read), and one
// training batch (32 windows of 1024 tokens) from it beside one from the Brown cache.
//
//   build/bench/bench_data --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "bench_setup.h"
#include "mixlab/data/corpus.h"
#include "mixlab/data/gpt2_bpe.h"
#include "mixlab/data/lm_dataset.h"

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

// 10^8 GPT-2 ids (200 MB) written once per process into the temp folder.
const std::string& token_bin_path() {
  static const std::string path = [] {
    const std::string p = (std::filesystem::temp_directory_path() / "mixlab_bench_train.bin").string();
    std::vector<uint16_t> ids(100'000'000);
    std::mt19937 rng(1);
    for (auto& id : ids) id = static_cast<uint16_t>(rng() % 50257);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 200'000'000);
    return p;
  }();
  return path;
}

void open_token_bin(benchmark::State& state) {
  const std::string& path = token_bin_path();
  for (auto _ : state) benchmark::DoNotOptimize(mixlab::LmDataset::open_bin(path, 50257).size());
  state.counters["tokens"] = 1e8;
}

void train_batch(benchmark::State& state, bool bin) {
  const mixlab::LmDataset d = [&] {
    if (bin) return mixlab::LmDataset::open_bin(token_bin_path(), 50257);
    const std::string brown = kRoot + "/data/brown";
    const mixlab::Corpus c =
        mixlab::Corpus::load_brown(std::filesystem::exists(brown) ? brown : kRoot + "/data/sample");
    const std::string cache = (std::filesystem::temp_directory_path() / "mixlab_bench_cache").string();
    return mixlab::LmDataset::open(c, mixlab::LmSplit::kTrain,
                                   mixlab::LmTokenizer::load(mixlab::LmTokenizerKind::kBytes, ""), cache);
  }();
  int64_t step = 0;
  for (auto _ : state) benchmark::DoNotOptimize(mixlab::lm_train_windows(d, 32, 1024, 0, step++).first.data_ptr());
  state.counters["stream_tokens"] = static_cast<double>(d.size());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 32 * 1024);
}

BENCHMARK(open_token_bin)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(train_batch, brown_cache, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(train_batch, token_bin, true)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  // The batches' tensors then come from the same allocator as in training.
  mixlab::bench::bench_setup(mixlab::bench::BenchThreads::kLibTorchDefault);
  return mixlab::bench::run_benchmarks(argc, argv);
}
