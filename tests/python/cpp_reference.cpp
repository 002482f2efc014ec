// tests/python/cpp_reference.cpp — the C++ side of the Python parity test (test_parity.py).
//
//   mixlab_py_reference SPEC C H B T SEED OUT
//   mixlab_py_reference --model CHECKPOINT B T SEED OUT
// Seeds torch's default generator, builds the mixer SPEC (d_model C, n_heads H, max_len T),
// draws x (B,T,C) ~ N(0,1), runs forward and backward of sum(y²), then decodes x token by token,
// all in float32 on one thread, and writes every result to OUT as records
//   "<name> <numel>\n" + numel raw float32 values (native byte order)
// in this order: y, dx, one "grad:<parameter name>" per parameter (C++ order), steps (B,T,C).
// The Python test does the same through `mixlab` in one process and requires equal bits: the
// Python path must be the C++ path, not a re-implementation.
// --model: loads CHECKPOINT as `mixlab eval` does (Trainer + checkpoint_load), seeds the generator,
// draws tokens (B,T) uniform in [0, vocab) and writes the records "tokens" and "logits" (B,T,V):
// test_model.py requires mixlab.load's logits on those tokens to equal them.
#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "mixlab/registry/registry.h"
#include "mixlab/train/checkpoint.h"
#include "mixlab/train/trainer.h"

namespace {

void write_record(std::ofstream& out, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kFloat32).contiguous();
  out << name << " " << c.numel() << "\n";
  out.write(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<std::streamsize>(c.numel() * 4));
}

}  // namespace

int model_logits(char** argv) {
  const int64_t B = std::stoll(argv[3]), T = std::stoll(argv[4]);
  at::set_num_threads(1);
  const mixlab::LoadedCheckpoint ckpt = mixlab::checkpoint_read(argv[2]);
  mixlab::Trainer trainer(ckpt.config);
  trainer.checkpoint_load(ckpt);
  torch::manual_seed(std::stoull(argv[5]));
  const torch::Tensor tokens = torch::randint(ckpt.config.task.vocab, {B, T}, torch::kInt64);
  torch::NoGradGuard no_grad;
  trainer.model().eval();
  std::ofstream out(argv[6], std::ios::binary);
  write_record(out, "tokens", tokens);
  write_record(out, "logits", trainer.model().forward(tokens));
  return out ? 0 : 3;
}

int main(int argc, char** argv) {
  if (argc == 7 && std::string(argv[1]) == "--model") {
    try {
      return model_logits(argv);
    } catch (const std::exception& e) {
      std::cerr << "mixlab_py_reference: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc != 8) {
    std::cerr << "usage: mixlab_py_reference SPEC C H B T SEED OUT\n";
    return 2;
  }
  try {
    const std::string spec = argv[1];
    const int64_t C = std::stoll(argv[2]), H = std::stoll(argv[3]), B = std::stoll(argv[4]), T = std::stoll(argv[5]);
    const uint64_t seed = std::stoull(argv[6]);
    at::set_num_threads(1);
    torch::manual_seed(seed);
    mixlab::MixerPtr mixer = mixlab::mixer_create(spec, mixlab::MixerDims{C, H, T});
    torch::Tensor x = torch::randn({B, T, C}).requires_grad_(true);
    torch::Tensor y = mixer->forward(x);
    (y * y).sum().backward();

    std::ofstream out(argv[7], std::ios::binary);
    write_record(out, "y", y);
    write_record(out, "dx", x.grad());
    for (const auto& p : mixer->named_parameters(true))
      write_record(out, "grad:" + p.key(),
                   p.value().grad().defined() ? p.value().grad() : torch::zeros_like(p.value()));

    torch::NoGradGuard no_grad;
    auto state = mixer->init_state(B);
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < T; ++t) steps.push_back(mixer->step(*state, x.detach().select(1, t)));
    write_record(out, "steps", torch::stack(steps, 1));
    if (!out) {
      std::cerr << "mixlab_py_reference: cannot write " << argv[7] << "\n";
      return 3;
    }
  } catch (const std::exception& e) {
    std::cerr << "mixlab_py_reference: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
