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

/// A checkpoint read once and verified (header, size, checksum, config, step): `mixlab eval` and
/// `--resume` read the file a single time and use this.
struct LoadedCheckpoint {
  std::string path;
  std::string payload;  // the torch archive bytes
  TrainConfig config;
  int64_t step = 0;
};

/// Reads and verifies a checkpoint. Throws mixlab::Error (mixlab::IoError if unreadable).
LoadedCheckpoint checkpoint_read(const std::string& path);

/// The config stored in a checkpoint (for `mixlab eval`). Throws like checkpoint_read.
TrainConfig checkpoint_read_config(const std::string& path);

/// Writes `model`, `optimizer`, `config`, `step` and the global CPU generator's state to `path`
/// atomically. The caller decides whether the weights are fit to be written.
void checkpoint_write(const std::string& path, const TrainConfig& config, int64_t step, const torch::nn::Module& model,
                      const torch::optim::Optimizer& optimizer);

/// Loads the checkpoint's weights into `model` (Module::load: it replaces tensors whatever their
/// shape, so callers that must keep shapes load into a scratch model first).
void checkpoint_load_model(const LoadedCheckpoint& checkpoint, torch::nn::Module& model);

/// Loads weights, optimiser state and the global CPU generator's state.
void checkpoint_load_training_state(const LoadedCheckpoint& checkpoint, torch::nn::Module& model,
                                    torch::optim::Optimizer& optimizer);

/// "checkpoint '<path>'": the prefix of every message about a checkpoint file.
std::string checkpoint_prefix(const std::string& path);

}  // namespace mixlab
