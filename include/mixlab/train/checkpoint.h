// mixlab/train/checkpoint.h — the training checkpoint file: its one reader and writer.
//
// File (format version 2): one header line
//   "mixlab-checkpoint 2 <payload bytes> <FNV-1a 64 checksum of the payload, 16 hex digits>\n"
// then the payload, a torch::serialize archive with the entries below. It is written with
// atomic_write_file (unique temp name, checked writes, fsync, rename, fsync of the directory).
// Reading takes the file once, checks the header, the size and the checksum, then the entries:
//   format     "mixlab-checkpoint-1"
//   config     the resolved config as JSON text (config_to_json)
//   step       steps completed
//   model      the model's parameters and buffers
//   optimizer  the optimiser's state (moments, step counts, param-group options)
//   rng        the global CPU generator state (tasks draw from their own seed streams)
//   train_state  the training loop's own state (TrainLoopState) as JSON text: the log window in
//              progress, the last reported window, the non-finite steps skipped, an early stop.
//              Optional: files written before it existed (2026-11-27; the same format version 2,
//              e.g. tests/data/formats/checkpoint_v2.pt) read as TrainLoopState's defaults, and
//              keys this mixlab does not know are ignored (a later one may add some).
// A missing, truncated, corrupt or mismatched file throws mixlab::Error naming the file and the
// problem (mixlab::IoError when it cannot be read at all).
//
// What this is not: the rules of which checkpoint may resume or start which run (the Trainer's,
// config_resume_mismatch / config_weights_mismatch), and the decode-state format
// (mixlab/mixer/state_io.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "mixlab/train/config.h"

namespace mixlab {

/// What the training loop decides and reports with beyond the weights, the optimiser and the RNG
/// (entry "train_state"), so that a resumed run reports and decides exactly as an uninterrupted
/// one. The defaults are a run at its start (and what a checkpoint without the entry means).
struct TrainLoopState {
  // The log window in progress: the steps since the last log_every line (finite steps only).
  double window_loss = 0;  // sum of their losses
  int64_t window_steps = 0;
  int64_t window_correct = 0, window_answer_tokens = 0;  // answer tokens right / scored
  // The means of the last reported window (result.json's train_loss and train_acc).
  double last_loss = 0, last_acc = 0;
  int64_t skipped = 0;       // non-finite steps skipped so far (counts against --skip-nonfinite)
  int64_t stopped_step = 0;  // > 0: stop_at stopped the run at this step (the checkpoint's step)
  double stop_at = 0;        // the config's stop_at that made that decision
};

/// A checkpoint read once and verified (header, size, checksum, config, step, train_state):
/// `mixlab eval` and `--resume` read the file a single time and use this.
struct LoadedCheckpoint {
  std::string path;
  std::string payload;  // the torch archive bytes
  TrainConfig config;
  int64_t step = 0;
  TrainLoopState loop;  // the defaults when the file has no train_state entry
};

/// Reads and verifies a checkpoint. Throws mixlab::Error (mixlab::IoError if unreadable).
LoadedCheckpoint checkpoint_read(const std::string& path);

/// The config stored in a checkpoint (for `mixlab eval`). Throws like checkpoint_read.
TrainConfig checkpoint_read_config(const std::string& path);

/// Writes `model`, `optimizer`, `config`, `step`, the global CPU generator's state and `loop` to
/// `path` atomically. The caller decides whether the weights are fit to be written.
void checkpoint_write(const std::string& path, const TrainConfig& config, int64_t step, const torch::nn::Module& model,
                      const torch::optim::Optimizer& optimizer, const TrainLoopState& loop = {});

/// Loads the checkpoint's weights into `model` (Module::load: it replaces tensors whatever their
/// shape, so callers that must keep shapes load into a scratch model first).
void checkpoint_load_model(const LoadedCheckpoint& checkpoint, torch::nn::Module& model);

/// Loads weights, optimiser state and the global CPU generator's state.
void checkpoint_load_training_state(const LoadedCheckpoint& checkpoint, torch::nn::Module& model,
                                    torch::optim::Optimizer& optimizer);

/// "checkpoint '<path>'": the prefix of every message about a checkpoint file.
std::string checkpoint_prefix(const std::string& path);

}  // namespace mixlab
