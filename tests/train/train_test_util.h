// Helpers shared by the train tests: a tiny causal test mixer and error-message assertions.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/mixers/mixer.h"
#include "mixlab/train/model.h"
#include "mixlab/train/tasks.h"
#include "support/expect_error.h"

namespace mixlab {

/// y_t = W * mean(x_0..x_t): causal, obviously right, with an O(1) decode state (running sum).
class CumulativeMeanMixer : public Mixer {
 public:
  explicit CumulativeMeanMixer(const MixerDims& d) {
    w_ = register_parameter("w", torch::randn({d.d_model, d.d_model}) / std::sqrt(static_cast<double>(d.d_model)));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    auto counts = torch::arange(1, x.size(1) + 1, x.options()).view({1, -1, 1});
    return torch::matmul(x.cumsum(1) / counts, w_.t());
  }
  struct State : MixerState {
    torch::Tensor sum;  // (B,C)
    int64_t pos = 0;
    int64_t position() const override { return pos; }
    int64_t bytes() const override { return tensor_bytes(sum); }
  };
  std::unique_ptr<MixerState> init_state(int64_t batch) override {
    auto s = std::make_unique<State>();
    s->sum = torch::zeros({batch, w_.size(0)});
    return s;
  }
  torch::Tensor step(MixerState& state, const torch::Tensor& x_t) override {
    auto& s = static_cast<State&>(state);
    s.sum = s.sum + x_t;
    ++s.pos;
    return torch::matmul(s.sum / static_cast<double>(s.pos), w_.t());
  }
  std::string spec() const override { return "test-cummean"; }
  std::string cost_class() const override { return "O(1)"; }

 private:
  torch::Tensor w_;
};

inline MixerFactory test_mixer_factory() {
  return [](const MixerDims& d) { return std::make_shared<CumulativeMeanMixer>(d); };
}

/// The golden multihop batch (tasks_test.cpp spells out its tokens): vocabulary 14 (keys 4..8,
/// values 9..13), S = 20, 4 pairs, links with probability 0.6, seed 11. One query (for key 4)
/// follows a link; position 10 is that link's label.
inline Batch golden_multihop_batch() {
  TaskSpec s;
  s.name = "multihop";
  s.vocab = 14;
  s.length = 20;
  s.pairs = 4;
  s.hop_prob = 0.6;
  return task_generate(s, 1, 20, 4, 11);
}

/// The shared helper under the name the train tests use.
inline void expect_error_contains(const std::function<void()>& f, std::initializer_list<std::string> fragments) {
  ::expect_error(f, fragments);
}
inline void expect_error_contains(const std::function<void()>& f, const std::string& fragment) { ::expect_error(f, fragment); }

}  // namespace mixlab
