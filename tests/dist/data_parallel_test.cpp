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
#include "support/ranks.h"

namespace data_parallel_test {

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

using mixlab::testing::env_for;
using mixlab::testing::on_ranks;
using mixlab::testing::randn_seeded;

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
  auto tensors_of = [](int64_t r) {
    const uint64_t s = 100 + 10 * static_cast<uint64_t>(r);
    return std::vector<torch::Tensor>{randn_seeded({5, 8}, s), randn_seeded({4, 3}, s + 1).t(), torch::Tensor(),
                                      randn_seeded({6}, s + 2), randn_seeded({10, 10}, s + 3)};
  };
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port), std::chrono::seconds(30), 256);
    std::vector<torch::Tensor> ts = tensors_of(r);
    dp.all_reduce_sum(ts);
    got[static_cast<size_t>(r)] = ts;
    calls[static_cast<size_t>(r)] = dp.all_reduce_calls();
  });
  auto a = tensors_of(0), b = tensors_of(1);
  const std::vector<size_t> defined{0, 1, 3, 4};
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(calls[r], 2);
    EXPECT_FALSE(got[r][2].defined());
    for (size_t i : defined) {
      EXPECT_TRUE(torch::allclose(got[r][i], a[i] + b[i], 1e-6, 1e-6)) << "rank " << r << " tensor " << i;
    }
    // Both ranks hold the same bits: the optimiser steps that follow keep them equal.
    for (size_t i : defined) EXPECT_TRUE(torch::equal(got[r][i], got[0][i]));
  }
}

// The started all-reduce: a point-to-point exchange up to kExchangeMaxRanks ranks, Gloo's ring
// above. Every rank must get the same bits; the exchange adds in rank order.
void expect_started_all_reduce_sums(int64_t world) {
  const int64_t port = mixlab::free_local_port();
  std::vector<torch::Tensor> got(static_cast<size_t>(world));
  auto part = [](int64_t r) { return randn_seeded({1000}, 200 + static_cast<uint64_t>(r)); };
  on_ranks(world, [&](int64_t r) {
    DataParallel dp(env_for(r, world, port), std::chrono::seconds(30));
    auto t = part(r);
    auto small = torch::full({3}, static_cast<double>(r + 1), torch::kFloat64);
    // Two collectives in flight at once, waited for in the other order.
    auto a = dp.start_all_reduce_sum(t, "all-reduce of test values");
    auto b = dp.start_all_reduce_sum(small, "all-reduce of test counts");
    EXPECT_TRUE(a.pending());
    b.wait();
    a.wait();
    EXPECT_FALSE(a.pending());
    a.wait();  // a second wait is a no-op
    got[static_cast<size_t>(r)] = t;
    EXPECT_TRUE(torch::equal(small, torch::full({3}, static_cast<double>(world * (world + 1) / 2), torch::kFloat64)));
  });
  auto expected = part(0);
  for (int64_t r = 1; r < world; ++r) expected = expected + part(r);
  for (int64_t r = 0; r < world; ++r) {
    const auto& t = got[static_cast<size_t>(r)];
    EXPECT_TRUE(torch::equal(t, got[0])) << "world " << world << ": rank " << r << " has other bits than rank 0";
    if (world <= DataParallel::kExchangeMaxRanks) {
      EXPECT_TRUE(torch::equal(t, expected)) << "world " << world << ", rank " << r << ": not the rank-order sum";
    } else {
      EXPECT_TRUE(torch::allclose(t, expected, 1e-5, 1e-5)) << "world " << world << ", rank " << r;
    }
  }
}

TEST(DataParallel, StartedAllReduceExchangeGivesEveryRankTheRankOrderSum) {
  expect_started_all_reduce_sums(2);
  expect_started_all_reduce_sums(3);
}

TEST(DataParallel, StartedAllReduceAboveTheExchangeUsesGlooRing) {
  expect_started_all_reduce_sums(DataParallel::kExchangeMaxRanks + 1);
}

TEST(DataParallel, StartedAllReduceAloneIsTheIdentity) {
  DataParallel dp(env_for(0, 1, mixlab::free_local_port()), std::chrono::seconds(5));
  auto t = torch::arange(4.0);
  auto w = dp.start_all_reduce_sum(t, "all-reduce of test values");
  w.wait();
  EXPECT_TRUE(torch::equal(t, torch::arange(4.0)));
  expect_error(
      [&] {
        dp.start_all_reduce_sum(torch::zeros({4, 4}).t(), "all-reduce of test values");
      },
      {"all-reduce of test values", "contiguous CPU tensor"});
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
      // all_reduce_sum runs start_all_reduce_sum(...).wait(): at 2 ranks the exchange path that
      // training uses.
      dp.all_reduce_sum({torch::ones({4})});
    } catch (const mixlab::DistributedError& e) {
      message = e.what();
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(message.find("rank 0 of 2"), std::string::npos) << message;
  EXPECT_NE(message.find("all-reduce of the gradients failed"), std::string::npos) << message;
  EXPECT_NE(message.find("lost rank 1 ("), std::string::npos) << message;
  EXPECT_LT(seconds, 20.0);  // the 5 s timeout at most, plus set-up; never the default 30 min
}

// The survivors of a lost rank name it, not each other: with 3 ranks, rank 1 leaves and ranks 0
// and 2 both report "lost rank 1" (a failed message to rank 1 does not stop the messages between
// 0 and 2).
TEST(DataParallel, SurvivorsNameTheLostRank) {
  const int64_t port = mixlab::free_local_port();
  std::vector<std::string> messages(3);
  const auto t0 = std::chrono::steady_clock::now();
  on_ranks(3, [&](int64_t r) {
    DataParallel dp(env_for(r, 3, port), std::chrono::seconds(5));
    dp.barrier();
    if (r == 1) return;  // rank 1 leaves: its process group is destroyed
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    try {
      dp.all_reduce_sum(std::vector<double>{1.0});
    } catch (const mixlab::DistributedError& e) {
      messages[static_cast<size_t>(r)] = e.what();
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int64_t r : {0, 2}) {
    const std::string& m = messages[static_cast<size_t>(r)];
    EXPECT_NE(m.find(fmt::format("rank {} of 3: all-reduce of the step statistics failed", r)), std::string::npos) << m;
    EXPECT_NE(m.find("lost rank 1 ("), std::string::npos) << m;
  }
  EXPECT_LT(seconds, 15.0);  // the 5 s timeout at most, plus set-up
}

// A rank that never joins is a timeout naming the missing ranks, on every rank that did come; a
// rank whose rank 0 never comes says it cannot reach the rendezvous server. Never a hang.
TEST(DataParallel, RankThatNeverJoinsIsATimeoutNamingIt) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  {
    // World 3, ranks 0 and 1 started: both name rank 2.
    const int64_t port = mixlab::free_local_port();
    std::vector<std::string> messages(2);
    const auto t0 = Clock::now();
    on_ranks(2, [&](int64_t r) {
      try {
        DataParallel dp(env_for(r, 3, port), std::chrono::seconds(2));
      } catch (const mixlab::DistributedError& e) {
        messages[static_cast<size_t>(r)] = e.what();
      }
    });
    EXPECT_LT(seconds_since(t0), 10.0);
    for (int64_t r : {0, 1}) {
      const std::string& m = messages[static_cast<size_t>(r)];
      EXPECT_NE(m.find(fmt::format("rank {} of 3: rank(s) 2 did not join the launch", r)), std::string::npos) << m;
      EXPECT_NE(m.find(std::to_string(port)), std::string::npos) << m;
      EXPECT_NE(m.find("within 2 s"), std::string::npos) << m;
    }
  }
  {
    // World 2, rank 1 alone: no server to reach.
    const int64_t port = mixlab::free_local_port();
    const auto t0 = Clock::now();
    expect_error([&] { DataParallel dp(env_for(1, 2, port), std::chrono::seconds(2)); },
                 {"rank 1 of 2: cannot reach the rendezvous server (rank 0)", std::to_string(port), "within 2 s"});
    EXPECT_LT(seconds_since(t0), 10.0);
  }
}

// Ranks with different fingerprints are refused by every rank, before the process group exists,
// each naming the field and both values.
TEST(DataParallel, RanksWithDifferentFingerprintsAreRefusedByEveryRank) {
  const int64_t port = mixlab::free_local_port();
  const mixlab::LaunchFingerprint same{{"config.d_model", "16"}, {"executable", "E"}};
  mixlab::LaunchFingerprint other = same;
  other["config.d_model"] = "32";
  std::vector<std::string> messages(3);
  on_ranks(3, [&](int64_t r) {
    try {
      DataParallel dp(env_for(r, 3, port), std::chrono::seconds(10), DataParallel::kDefaultBucketBytes,
                      r == 2 ? other : same);
    } catch (const mixlab::LaunchMismatchError& e) {
      messages[static_cast<size_t>(r)] = e.what();
    }
  });
  EXPECT_NE(messages[0].find("rank 0 of 3: refusing to train"), std::string::npos) << messages[0];
  EXPECT_NE(messages[0].find("'config.d_model': rank 0 has 16, rank 2 has 32"), std::string::npos) << messages[0];
  EXPECT_NE(messages[1].find("'config.d_model': rank 1 has 16, rank 2 has 32"), std::string::npos) << messages[1];
  EXPECT_NE(messages[2].find("'config.d_model': rank 2 has 32, rank 0 has 16"), std::string::npos) << messages[2];

  // Equal fingerprints join and work.
  const int64_t port2 = mixlab::free_local_port();
  std::vector<double> sums(2);
  on_ranks(2, [&](int64_t r) {
    DataParallel dp(env_for(r, 2, port2), std::chrono::seconds(10), DataParallel::kDefaultBucketBytes, same);
    sums[static_cast<size_t>(r)] = dp.all_reduce_sum(std::vector<double>{static_cast<double>(r + 1)})[0];
  });
  EXPECT_EQ(sums, (std::vector<double>{3.0, 3.0}));
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

}  // namespace data_parallel_test
