// A tiny causal test mixer shared by the model and train tests: obviously right, O(1) decode state.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>

#include "mixlab/mixer/mixer.h"
#include "mixlab/model/model.h"

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
    int64_t batch() const override { return sum.size(0); }
    void io(StateArchive& ar) override {
      ar.scalar("position", pos);
      ar.tensor("sum", sum);
    }
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

}  // namespace mixlab
