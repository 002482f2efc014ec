// bench/bench_setup.h — what every benchmark binary does before its first tensor, in one place.
//
// Why one place: the CLI installs the CPU block cache (apps/mixlab/main.cpp), and a benchmark
// without it times page faults that the CLI never takes. Four binaries had left it out until
// 2026-11-30: bench_brl's local:64 rows at T >= 4096 read 0.60x BRL, and attention's decode rows
// were up to 3x slow. And each binary chose its threads by its own rule, while scripts/bench.sh
// wrote one table of them by hand. That table said bench_resolvent ran at LibTorch's default (1),
// but the binary read MIXLAB_THREADS, which bench.sh sets to 2. (docs/log/benchmarks-2026-11.md,
// "The decode benchmarks on the CPU block cache".) bench_setup() installs the cache, sets the
// threads by one named rule, and writes both into the run's context ("threads",
// "cpu_block_cache", "blas"). bench.sh reads its thread table back from there.
#pragma once

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "mixlab/core/blas_info.h"
#include "mixlab/core/cpu_block_cache.h"
#include "mixlab/core/threads.h"

namespace mixlab::bench {

enum class BenchThreads {
  kEnvOrAllCores,         // $MIXLAB_THREADS, else every core (threads_configure())
  kEnvOrLibTorchDefault,  // $MIXLAB_THREADS, else LibTorch's default as the process started
  kLibTorchDefault,       // LibTorch's default; $MIXLAB_THREADS is not read
  kOne,                   // one thread whatever the environment (decode: one token at a time)
};

struct BenchSetup {
  int threads = 0;
  bool block_cache = false;
};

/// Installs the CPU block cache, sets LibTorch's intra-op threads by `rule` and records both, with
/// the BLAS library and its kernels, in Google Benchmark's context. Call it first in main(),
/// before any tensor. Throws mixlab::Error for a malformed MIXLAB_THREADS or MIXLAB_CPU_CACHE_MB.
inline BenchSetup bench_setup(BenchThreads rule) {
  BenchSetup s;
  s.block_cache = install_cpu_block_cache();
  switch (rule) {
    case BenchThreads::kEnvOrAllCores:
      s.threads = threads_configure();
      break;
    case BenchThreads::kEnvOrLibTorchDefault:
      s.threads = std::getenv("MIXLAB_THREADS") != nullptr ? threads_configure() : at::get_num_threads();
      break;
    case BenchThreads::kLibTorchDefault:
      s.threads = at::get_num_threads();
      break;
    case BenchThreads::kOne:
      s.threads = threads_configure(1);
      break;
  }
  benchmark::AddCustomContext("threads", std::to_string(s.threads));
  benchmark::AddCustomContext("cpu_block_cache", s.block_cache ? "on" : "off");
  benchmark::AddCustomContext("blas", blas_summary());
  return s;
}

/// Google Benchmark's own main() after bench_setup(): parse its flags (an unknown flag is an error),
/// run the registered cases, shut down. Returns main()'s exit status.
inline int run_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace mixlab::bench
