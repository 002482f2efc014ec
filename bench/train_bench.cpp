// Where one training step of `mixlab train --task lm` goes (issue 38 item 2): the step taken apart
// into its phases on the trainer's own model, optimiser groups and batches, timed one by one, and
// the whole Trainer::train_step beside them. Median milliseconds per phase over the timed steps.
//
//   build/bench/bench_train [--threads N] [--steps 60] [--mixer attention] [--batch 16] [--length 128]
//   build/bench/bench_train --preset default --task recall --mixer resolvent:pow2   # a compare run's step
//
// With --preset, the config is compare's for that preset, task and mixer (mixlab/train/compare.h),
// --batch and --length override it only where given.
//
// Phases: batch (the task's batch of the step), forward (DecoderModel::forward), score
// (batch_score: loss and the accuracy counts), backward, zero_grad, clip (clip_grad_norm_) and
// optimizer (torch::optim::AdamW::step), then the same optimiser update through adamw_fused_step
// (mixlab/train/fused_adamw.h, clipping folded in: norm + fused); the whole step also beside
// itself with RoPE's composed reference (ComposedRopeGuard). Run from the checkout (the lm
// task reads data/brown and runs/cache). Not a Google Benchmark: the phases of one step share
// state (the graph, the gradients) and are timed in sequence. The phases run the batch as one
// group (each operation split over --threads); Trainer::train_step runs the config's row groups
// (mixlab/train/row_groups.h: by default one group per thread), so at --threads > 1 the whole
// step is not the sum of the phases.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "mixlab/core/cpu_block_cache.h"
#include "mixlab/core/rope.h"
#include "mixlab/core/threads.h"
#include "mixlab/resolvent/resolvent.h"
#include "mixlab/train/compare.h"
#include "mixlab/train/config.h"
#include "mixlab/train/fused_adamw.h"
#include "mixlab/train/tasks.h"
#include "mixlab/train/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int64_t steps = 60, batch = 0, length = 0;  // 0: the preset's (lm without a preset: 16, 128)
  std::string mixer = "attention", task = "lm", preset;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--threads")
      threads = std::atoi(v.c_str());
    else if (k == "--steps")
      steps = std::atoll(v.c_str());
    else if (k == "--batch")
      batch = std::atoll(v.c_str());
    else if (k == "--length")
      length = std::atoll(v.c_str());
    else if (k == "--mixer")
      mixer = v;
    else if (k == "--task")
      task = v;
    else if (k == "--preset")
      preset = v;
    else if (k == "--dense-min-width")
      mixlab::set_resolvent_dense_blocks({std::atoll(v.c_str()), mixlab::resolvent_dense_blocks().rows});
    else {
      std::fprintf(stderr,
                   "bench_train: unknown option '%s' (--threads, --steps, --batch, --length, --mixer, --task, "
                   "--preset, --dense-min-width)\n",
                   k.c_str());
      return 2;
    }
  }
  mixlab::install_cpu_block_cache();
  mixlab::threads_configure(threads);
  const int64_t warm = 10, total = warm + steps;
  nlohmann::json overrides = {{"steps", total}};
  if (batch > 0) overrides["batch"] = batch;
  if (length > 0) overrides["length"] = length;
  mixlab::TrainConfig config;
  if (!preset.empty()) {
    config = mixlab::compare_config(preset, task, mixer, overrides);
  } else {
    nlohmann::json j = {{"task", task}, {"mixer", mixer}, {"batch", 16}, {"length", 128}};
    if (task == "lm") j["eval_tokens"] = 512;
    j.update(overrides);
    config = mixlab::config_from_json(j, "(bench_train)");
  }
  batch = config.batch;
  length = mixlab::task_sequence_length(config.task, config.task.length);

  // The phases, on a model and optimiser built as the trainer builds them.
  mixlab::Trainer phases_trainer(config);
  auto& model = phases_trainer.model();
  const auto optimizer_owner = mixlab::make_adamw(config, model.parameters());
  torch::optim::AdamW& optimizer = *optimizer_owner;
  const std::vector<torch::Tensor> params = model.parameters();

  std::map<std::string, std::vector<double>> t;
  const char* order[] = {"batch",    "forward", "score",     "zero_grad",
                         "backward", "clip",    "optimizer", "fused (norm+step)"};
  model.train();
  for (int64_t s = 0; s < total; ++s) {
    auto t0 = Clock::now();
    const mixlab::Batch b = mixlab::task_train_batch(config.task, batch, s, total, config.seed);
    const double t_batch = ms_since(t0);
    t0 = Clock::now();
    auto logits = model.forward(b.tokens);
    const double t_fwd = ms_since(t0);
    t0 = Clock::now();
    auto score = mixlab::batch_score(logits, b);
    const double t_score = ms_since(t0);
    t0 = Clock::now();
    optimizer.zero_grad();
    const double t_zero = ms_since(t0);
    t0 = Clock::now();
    score.loss.backward();
    const double t_bwd = ms_since(t0);
    // Both optimisers on the same gradients: the library pair on a copy of the state, then the
    // fused step (the one the run keeps).
    // A parameter no loss path reaches (the memory LN and MLP of a model's last memory block)
    // has no gradient: kept undefined, as the optimisers skip it.
    std::vector<torch::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    t0 = Clock::now();
    torch::nn::utils::clip_grad_norm_(params, config.grad_clip);
    const double t_clip = ms_since(t0);
    std::vector<torch::Tensor> saved;
    {
      torch::NoGradGuard ng;
      for (auto& p : params) saved.push_back(p.detach().clone());
    }
    t0 = Clock::now();
    optimizer.step();
    const double t_opt = ms_since(t0);
    {
      // Undo that step's weights (its moments are overwritten below too) and time the fused one.
      torch::NoGradGuard ng;
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].copy_(saved[i]);
        if (grads[i].defined()) params[i].grad().copy_(grads[i]);
      }
    }
    t0 = Clock::now();
    const double norm = mixlab::grad_norm(params);
    mixlab::adamw_fused_step(optimizer, mixlab::grad_clip_coef(norm, config.grad_clip));
    const double t_fused = ms_since(t0);
    if (s < warm) continue;
    t["batch"].push_back(t_batch);
    t["forward"].push_back(t_fwd);
    t["score"].push_back(t_score);
    t["zero_grad"].push_back(t_zero);
    t["backward"].push_back(t_bwd);
    t["clip"].push_back(t_clip);
    t["optimizer"].push_back(t_opt);
    t["fused (norm+step)"].push_back(t_fused);
  }
  // The whole step as the run takes it, interleaved step by step with the same step on RoPE's
  // composed reference (ComposedRopeGuard: the rotation before issue 38), so that a load from
  // elsewhere hits both alike.
  mixlab::Trainer trainer(config), composed_rope(config);
  std::vector<double> whole, whole_composed;
  for (int64_t s = 0; s < total; ++s) {
    auto t0 = Clock::now();
    trainer.train_step();
    if (s >= warm) whole.push_back(ms_since(t0));
    mixlab::ComposedRopeGuard guard;
    t0 = Clock::now();
    composed_rope.train_step();
    if (s >= warm) whole_composed.push_back(ms_since(t0));
  }
  std::printf(
      "%s, %s, B %lld, T %lld, %d thread(s), median of %lld steps after %lld; the whole step in %lld row "
      "group(s)\n",
      mixer.c_str(), task.c_str(), static_cast<long long>(batch), static_cast<long long>(length), threads,
      static_cast<long long>(steps), static_cast<long long>(warm), static_cast<long long>(trainer.row_groups()));
  double sum = 0;
  for (const char* k : order) {
    std::printf("  %-18s %8.3f ms\n", k, median(t[k]));
    if (std::strcmp(k, "fused (norm+step)") != 0) sum += median(t[k]);
  }
  std::printf("  %-18s %8.3f ms (phases batch..optimizer)\n", "sum", sum);
  const double w = median(whole), wc = median(whole_composed);
  std::printf("  %-18s %8.3f ms = %.0f tok/s\n", "Trainer::train_step", w,
              static_cast<double>(batch * length) / (w / 1e3));
  std::printf("  %-18s %8.3f ms = %.0f tok/s (the same step, RoPE composed)\n", "  composed RoPE", wc,
              static_cast<double>(batch * length) / (wc / 1e3));
  return 0;
}
