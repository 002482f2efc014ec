// Data-parallel collectives: torchrun's variables, bucketed all-reduce, broadcast, and a dead
// peer. Two ranks run as two threads of this process, each with its own store client and Gloo
// process group on a free loopback port (the same code path as two processes).
#include "mixlab/dist/data_parallel.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "mixlab/dist/dist_env.h"
#include "mixlab/dist/launch.h"
#include "support/expect_error.h"

namespace {

using mixlab::DataParallel;
using mixlab::DistEnv;

// Sets the variables for one scope and restores the previous values after it.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v.empty()) {
        ::unsetenv(k.c_str());
      } else {
        ::setenv(k.c_str(), v.c_str(), 1);
      }
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) {
        ::setenv(k.c_str(), v->c_str(), 1);
      } else {
        ::unsetenv(k.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

DistEnv env_for(int64_t rank, int64_t world, int64_t port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.master_port = port;
  e.launched = true;
  return e;
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

TEST(DistEnv, AloneWithoutWorldSize) {
  ScopedEnv env({{"WORLD_SIZE", ""}, {"RANK", ""}});
  const DistEnv e = mixlab::dist_env_from_environment();
  EXPECT_FALSE(e.launched);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
}

TEST(DistEnv, ReadsTorchrunVariables) {
  ScopedEnv env(
      {{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29611"}});
  const DistEnv e = mixlab::dist_env_from_environment();
  EXPECT_TRUE(e.launched);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29611);
}

TEST(DistEnv, BadVariablesAreNamed) {
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
    expect_error([] { mixlab::dist_env_from_environment(); }, {"RANK", "[0, 1]", "got 2"});
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "0"}, {"RANK", "0"}});
    expect_error([] { mixlab::dist_env_from_environment(); }, {"WORLD_SIZE", "positive integer"});
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", ""}});
    expect_error([] { mixlab::dist_env_from_environment(); }, "RANK is not set");
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", ""}});
    expect_error([] { mixlab::dist_env_from_environment(); }, "MASTER_PORT is not set");
  }
  {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "70000"}});
    expect_error([] { mixlab::dist_env_from_environment(); }, {"MASTER_PORT", "[1, 65535]", "70000"});
  }
}

TEST(DataParallel, BucketedAllReduceSumsEveryTensor) {
  const int64_t port = mixlab::free_local_port();
  // Tensors of 40, 12, 6 and 100 floats, one of them non-contiguous and one undefined; buckets
  // of 256 bytes = 64 floats: {40, 12, 6}, {100} -> 2 collectives.
  std::vector<std::vector<torch::Tensor>> got(2);
  std::vector<int64_t> calls(2);
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(30), 256);
    torch::manual_seed(100 + r);
    std::vector<torch::Tensor> ts{torch::randn({5, 8}), torch::randn({4, 3}).t(), torch::Tensor(), torch::randn({6}),
                                  torch::randn({10, 10})};
    dp.all_reduce_sum(ts);
    got[static_cast<size_t>(r)] = ts;
    calls[static_cast<size_t>(r)] = dp.all_reduce_calls();
  });
  torch::manual_seed(100);
  std::vector<torch::Tensor> a{torch::randn({5, 8}), torch::randn({4, 3}).t(), torch::randn({6}),
                               torch::randn({10, 10})};
  torch::manual_seed(101);
  std::vector<torch::Tensor> b{torch::randn({5, 8}), torch::randn({4, 3}).t(), torch::randn({6}),
                               torch::randn({10, 10})};
  const std::vector<size_t> defined{0, 1, 3, 4};
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(calls[r], 2);
    EXPECT_FALSE(got[r][2].defined());
    for (size_t i = 0; i < a.size(); ++i) {
      const auto& t = got[r][defined[i]];
      EXPECT_TRUE(torch::allclose(t, a[i] + b[i], 1e-6, 1e-6)) << "rank " << r << " tensor " << i;
    }
    // Both ranks hold the same bits: the optimiser steps that follow keep them equal.
    for (size_t i : defined) EXPECT_TRUE(torch::equal(got[r][i], got[0][i]));
  }
}

TEST(DataParallel, BroadcastAndScalars) {
  const int64_t port = mixlab::free_local_port();
  std::vector<torch::Tensor> got(2);
  std::vector<std::vector<double>> sums(2);
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(30));
    auto t = torch::full({3, 2}, static_cast<float>(r + 1)).t();  // non-contiguous: written back
    dp.broadcast({t});
    got[static_cast<size_t>(r)] = t;
    sums[static_cast<size_t>(r)] = dp.all_reduce_sum(std::vector<double>{1.5 * static_cast<double>(r), 2.0});
    dp.barrier();
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_TRUE(torch::equal(got[r], torch::ones({2, 3}))) << "rank " << r;
    EXPECT_EQ(sums[r], (std::vector<double>{1.5, 4.0}));
  }
}

TEST(DataParallel, DeadPeerIsAnErrorNamingTheRankNotAHang) {
  const int64_t port = mixlab::free_local_port();
  std::string message;
  const auto t0 = std::chrono::steady_clock::now();
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(5));
    dp.barrier();
    if (r == 1) return;  // rank 1 leaves: its process group is destroyed
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    try {
      dp.all_reduce_sum({torch::ones({4})});
    } catch (const mixlab::DistributedError& e) {
      message = e.what();
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(message.find("rank 0 of 2"), std::string::npos) << message;
  EXPECT_NE(message.find("all-reduce of the gradients failed"), std::string::npos) << message;
  EXPECT_LT(seconds, 20.0);  // the 5 s timeout at most, plus set-up; never the default 30 min
}

TEST(DataParallel, PortInUseIsNamed) {
  const int64_t port = mixlab::free_local_port();
  std::string message;
  on_ranks(2, [&](int64_t r) {
    if (r == 1) return;
    DataParallel first(env_for(0, 1, port), std::chrono::seconds(5));  // world 1: serves alone
    (void)first;
    try {
      DataParallel second(env_for(0, 2, port), std::chrono::seconds(2));
    } catch (const mixlab::DistributedError& e) {
      message = e.what();
    }
  });
  EXPECT_NE(message.find("already in use"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(port)), std::string::npos) << message;
}

TEST(DataParallel, InvalidArguments) {
  expect_error([] { DataParallel(env_for(2, 2, 29500), std::chrono::seconds(1)); }, {"rank 2", "[0, world size 2)"});
  expect_error([] { DataParallel(env_for(0, 1, 29500), std::chrono::milliseconds(0)); }, "timeout must be > 0");
  mixlab::LaunchOptions o;
  o.nproc = 0;
  expect_error([&] { mixlab::launch_local_workers(o, {}); }, "--nproc must be >= 1, got 0");
}

}  // namespace
