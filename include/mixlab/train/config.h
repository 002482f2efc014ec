// mixlab/train/config.h — everything a training run depends on, read from a JSON file.
//
// A config is a flat JSON object; every key is optional and unknown keys are an error (a typo
// must not silently train the default). Keys, defaults (the fast CPU setting) and meaning:
//   task "copy"          copy | recall | multihop | textcopy | s5 | lm | file | mad_recall |
//                        mad_fuzzy_recall | mad_noisy_recall | selective_copy | mad_compression |
//                        mad_memorization | induction (mixlab/train/tasks.h)
//   data ""              file: the .npz (arrays inputs, labels; -100 = not scored) or .npy of rows
//                        (mixlab/train/task_file.h); stored absolute. It sets length (T) and, when
//                        the key vocab is absent, vocab (max id + 1); other tasks: must be empty
//   eval_data ""         file: held-out rows (same T); "" = the last max(1, N/10) rows of data
//   vocab 64             vocabulary size V (4 special tokens + content; the MAD suite and
//                        induction default to their papers' sizes, tasks.h); lm: the tokenizer's
//                        (set automatically; another value is an error, except with tokens=);
//                        s5: 4 + n! (set from elements)
//   length 0             task length (copy: longest copied sequence; recall/multihop: sequence
//                        length; lm: window T); 0 = the task's default (copy 16, recall/multihop
//                        64, lm 128, s5 18; the MAD suite and induction: tasks.h's table)
//   tokenizer "bytes"    lm: bytes (V = 256) | gpt2 (V = 50257: the tied embedding alone is
//                        50257 x d_model parameters and the logits B x T x 50257 floats) | ids
//                        (token files only; vocab= required); default gpt2 with tokens=
//   corpus ""            lm: a plain-text corpus instead of Brown: a folder of text files or one
//                        file of blank-line separated documents (mixlab/data/text_corpus.h)
//   tokens ""            lm: a folder with nanoGPT's train.bin / val.bin (uint16 ids); vocab may
//                        then be set (gpt2: 50257..65536; ids: the files' vocabulary).
//                        corpus and tokens are stored as absolute paths (mixlab/train/task_lm.h)
//   eval_tokens 0        lm: evaluate on the first N tokens of the valid stream (0 = all of it)
//   eval_stride 0        lm: sliding-window stride of the evaluation (0 = length / 2)
//   max_len 0            longest sequence the model accepts (0 = the longest its task trains
//                        on); larger to evaluate beyond the training length (length
//                        generalisation, mixlab/train/length_sweep.h). Changes the parameters of
//                        mixers with position tables (toeplitz), not of the others
//   pairs 0              recall/multihop key–value pairs; 0 = default (8)
//   hop_prob 0.5         multihop link probability
//   curriculum true      equal phases growing length and pairs (mixlab/train/tasks.h)
//   curriculum_phases 4  1..8 phases; phase p of P divides length and pairs by 2^(P-1-p)
//   min_length 0         copy/recall/multihop/textcopy: training lengths are drawn from
//                        [min_length, L_p] instead of [ceil(L_p / 2), L_p] (mixlab/train/tasks.h)
//   elements 5           s5: n of the symmetric group S_n, 2..5 (S5 is the paper's task)
//   noise_frac 0.2, noise_vocab 16   mad_noisy_recall only: noise slot probability, noise tokens
//   key_len 3, value_len 3           mad_fuzzy_recall only: longest key / value in tokens
//   copy_tokens 8                    selective_copy only: tokens to copy
//   map_seed 12345                   mad_memorization only: seed of the key -> value map
//                        (a task-only key in another task's config is an error)
//   d_model 64, layers 2, heads 4, mlp_ratio 4, mixer "attention" (a registry spec, or one
//                        per layer for a hybrid, "ssm*3|attention": mixlab/registry/layer_specs.h;
//                        a list must fit `layers`)
//   steps 300, batch 32, lr 3e-3, warmup 30, weight_decay 0.1, beta1 0.9, beta2 0.98,
//   grad_clip 1.0, seed 0
//   row_groups 0         a step's batch split by rows over this many threads, each running forward
//                        and backward with one intra-op thread on a replica sharing the weights
//                        (mixlab/train/row_groups.h); the gradient is the same up to rounding.
//                        0 = one group per intra-op thread (--threads), at most batch; 1 = off
//                        (every operation split over the threads instead). May differ on --resume.
//                        compare runs 1 unless set (its table must not depend on --jobs); data
//                        parallel runs 1 per process (an explicit value > 1 is an error there)
//   schedule "cosine"    after the warmup: cosine | wsd (warmup-stable-decay) | constant
//   decay_frac 0.2       wsd: fraction of the steps, at the end, over which lr decays to 0
//   stop_at 0            early stop: at an eval_every evaluation whose validation accuracy (answer
//                        accuracy; lm: token accuracy) is >= stop_at, in (0, 1], the run ends
//                        (the validation split, not the reported one: tasks.h EvalSplit; lm
//                        reports valid anyway, task file has one held-out set and decides on it)
//                        there (checkpoint and final evaluation as at the last step;
//                        result.json "stopped_early"); needs eval_every > 0. 0 = off
//   eval_batches 4 (file: every held-out row instead), eval_batch 0 (0 = batch), eval_every 0 (0 = only at the end),
//   log_every 10, checkpoint_every 0 (0 = only at the end)
// Every value is checked (type and range); errors name the key and the file. Integer keys are
// at most 2^40 (seed: any uint64); a value out of range is an error, never clamped. Config files
// are read up to kConfigMaxBytes. config_memory_bytes estimates what a run allocates, so an
// absurd config is refused before LibTorch tries (config_check_memory).
//
// Not supported: nested configs, several tasks per run (use `mixlab compare`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "mixlab/train/tasks.h"

namespace mixlab {

struct TrainConfig {
  TaskSpec task;  // name, vocab, length, pairs, hop_prob, curriculum

  int64_t d_model = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t mlp_ratio = 4;
  std::string mixer = "attention";

  int64_t steps = 300;
  int64_t batch = 32;
  double lr = 3e-3;
  int64_t warmup = 30;
  std::string schedule = "cosine";  // after warmup: cosine | wsd | constant (config_lr_at)
  double decay_frac = 0.2;          // wsd: the last fraction of the steps decays linearly to 0
  double stop_at = 0;               // (0, 1]: stop at an eval_every evaluation reaching it; 0 = off
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double grad_clip = 1.0;
  int64_t row_groups = 0;  // the batch's rows on this many threads (row_groups.h); 0 = one per intra-op thread
  uint64_t seed = 0;

  int64_t eval_batches = 4;
  int64_t eval_batch = 0;
  int64_t eval_every = 0;
  int64_t log_every = 10;
  int64_t checkpoint_every = 0;
  int64_t eval_tokens = 0;  // lm
  int64_t eval_stride = 0;  // lm; 0 = length / 2 (config_eval_stride)
  int64_t max_len = 0;      // 0 = task_sequence_length(task, task.length) (config_max_len)
};

/// The largest row_groups (one thread per group).
constexpr int64_t kMaxRowGroups = 256;

/// Throws when `config` asks for row groups (row_groups > 1) in a data-parallel run of
/// `processes` > 1: each process trains its rows on its own threads. The launcher checks it before
/// starting processes, the trainer again when it joins one, with the same message.
void config_check_row_groups_for_processes(const TrainConfig& config, int64_t processes);

/// Largest max_len a config may ask for.
constexpr int64_t kConfigMaxLen = int64_t{1} << 20;

/// Config files larger than this are refused (a config is a few hundred bytes).
constexpr int64_t kConfigMaxBytes = int64_t{1} << 20;

/// Default task length / pair count used when the config leaves them at 0.
int64_t config_default_length(const std::string& task);
int64_t config_default_pairs(const std::string& task);
/// Default vocabulary of a task (64, or the MAD suite's own: task_mad.h).
int64_t config_default_vocab(const std::string& task);
/// False when `key` belongs to one task only (noise_frac, key_len, ...) and `task` is another.
bool config_key_applies(const std::string& key, const std::string& task);

/// Parses a JSON object (already parsed). `origin` names the source in messages (a path or
/// "--config"). Resolves defaults (length/pairs 0, eval_batch 0) and validates everything.
TrainConfig config_from_json(const nlohmann::json& j, const std::string& origin);
/// Reads and parses a file; malformed JSON is reported with the path and the parser's position.
TrainConfig config_load(const std::string& path);
/// The fully resolved config as JSON (all keys; round-trips through config_from_json).
nlohmann::json config_to_json(const TrainConfig& c);
/// Validates a config built in code (same checks as config_from_json).
void config_validate(const TrainConfig& c, const std::string& origin);
/// The keys whose values must match for `--resume` (everything but logging/eval cadence).
/// Returns "" when `a` and `b` agree, else a message naming the first differing key and values.
std::string config_resume_mismatch(const TrainConfig& checkpoint, const TrainConfig& current);
/// The keys that shape a model's parameters (mixer, d_model, layers, heads, mlp_ratio, vocab):
/// another run's weights can start this one (`train --init-from`) only when they agree. Task,
/// length, schedule and optimiser may differ. Returns "" or a message naming the first
/// differing key. (max_len shapes only position tables; Trainer::init_weights checks shapes.)
std::string config_weights_mismatch(const TrainConfig& source, const TrainConfig& current);
/// A rough estimate (bytes) of what training this config allocates: parameters, gradients and
/// Adam state, plus activations (and (B,H,T,T) scores for full attention). Deliberately low.
double config_memory_bytes(const TrainConfig& c);
/// Throws mixlab::Error when config_memory_bytes(c) > limit_bytes; `limit_name` names the limit
/// in the message (e.g. "--max-memory" or "this machine's memory").
void config_check_memory(const TrainConfig& c, double limit_bytes, const std::string& origin,
                         const std::string& limit_name);
/// Physical memory of this machine in bytes.
double machine_memory_bytes();
/// The longest sequence the model of `c` accepts: max_len, or the task's longest when it is 0.
int64_t config_max_len(const TrainConfig& c);
/// The lm evaluation stride: eval_stride, or max(1, length / 2) when it is 0.
int64_t config_eval_stride(const TrainConfig& c);
/// Schedule: linear warmup lr*(step+1)/warmup for step < warmup, then by `schedule`:
///   cosine    from lr to 0 at `steps` (half a cosine over the steps after warmup)
///   wsd       warmup-stable-decay: lr until the last decay_frac of the steps (of all `steps`),
///             then linearly to 0 at `steps`
///   constant  lr
/// The value at `step` is the one the optimiser uses for that step (0-based).
double config_lr_at(const TrainConfig& c, int64_t step);

}  // namespace mixlab
