// Ranks as threads: the dist tests run each rank on a thread of the test process, with its own
// store client and Gloo process group on a free loopback port (the same code path as processes).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <exception>
#include <thread>
#include <vector>

#include "mixlab/dist/dist_env.h"

namespace mixlab::testing {

inline DistEnv env_for(int64_t rank, int64_t world, int64_t port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.master_port = port;
  e.launched = true;
  return e;
}

// torch::randn from its own generator: the rank threads must not share the global one (a race
// between their manual_seed and randn calls).
inline torch::Tensor randn_seeded(at::IntArrayRef shape, uint64_t seed, torch::ScalarType dtype = torch::kFloat32) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen, torch::TensorOptions().dtype(dtype));
}

// Runs fn(rank) on `world` threads and rethrows the first failure.
template <typename Fn>
void on_ranks(int64_t world, Fn fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mixlab::testing
