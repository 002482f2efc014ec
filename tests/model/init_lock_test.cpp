// model_init_mutex (mixlab/model/init_lock.h): one lock for the whole process, the same from
// every thread, held by whoever draws a model's initialisation from the global generator. The
// reference: two builds of the same seeded model, each under the lock while another thread builds
// and draws beside it, give the weights of a build alone.
#include "mixlab/model/init_lock.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <thread>

#include "mixlab/model/model.h"
#include "mixlab/registry/layer_specs.h"

namespace mixlab {
namespace init_lock_test {
namespace {

TEST(ModelInitLock, OneMutexForEveryThread) {
  std::mutex* here = &model_init_mutex();
  std::mutex* there = nullptr;
  std::thread([&] { there = &model_init_mutex(); }).join();
  EXPECT_EQ(here, there);
  std::lock_guard<std::mutex> held(model_init_mutex());
  bool taken_elsewhere = true;
  std::thread([&] { taken_elsewhere = model_init_mutex().try_lock(); }).join();
  EXPECT_FALSE(taken_elsewhere);
}

std::vector<torch::Tensor> seeded_weights() {
  ModelDims d;
  d.vocab = 16;
  d.d_model = 16;
  d.layers = 1;
  d.heads = 2;
  d.max_len = 8;
  torch::manual_seed(11);
  DecoderModel m(d, mixer_factory_from_spec("attention", 1));
  std::vector<torch::Tensor> w;
  for (auto& p : m.parameters()) w.push_back(p.detach().clone());
  return w;
}

TEST(ModelInitLock, BuildsUnderItDoNotInterleave) {
  const auto alone = seeded_weights();
  std::atomic<bool> stop{false};
  // Another thread keeps seeding and drawing from the global generator, under the lock.
  std::thread other([&] {
    while (!stop) {
      std::lock_guard<std::mutex> lock(model_init_mutex());
      torch::manual_seed(99);
      (void)torch::rand({64});
    }
  });
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<torch::Tensor> w;
    {
      std::lock_guard<std::mutex> lock(model_init_mutex());
      w = seeded_weights();
    }
    ASSERT_EQ(w.size(), alone.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(torch::equal(w[i], alone[i])) << rep << " " << i;
  }
  stop = true;
  other.join();
}

}  // namespace
}  // namespace init_lock_test
}  // namespace mixlab
