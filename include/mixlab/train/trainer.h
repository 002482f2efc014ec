// mixlab/train/trainer.h — training loop, evaluation and checkpoints for one config.
//
// Optimiser: AdamW (beta1/beta2 from the config, 0.9/0.98 by default), weight decay on weight
// matrices and embeddings (tensors with dim >= 2) only, linear warmup then cosine decay
// (config_lr_at), gradient-norm clipping at grad_clip (LibTorch's clip_grad_norm_ and AdamW step;
// mixlab/train/fused_adamw.h is a fused form bench_train times, not used here: it rounds
// differently and saves about 0.1 ms a step). Loss: mean cross-entropy over the answer positions
// of a batch (mask == 1); accuracy = token accuracy over the same positions.
//
// Determinism: the model is initialised after torch::manual_seed(seed); the batch of step s is a
// pure function of (task, seed, s) (tasks.h). With one intra-op thread, N steps in one run and
// N/2 steps + --resume + N/2 steps give bit-identical parameters (tested).
//
// Row groups (mixlab/train/row_groups.h, key row_groups; by default one per intra-op thread):
// a step's batch is split by rows over threads, each running forward and backward on a replica
// that shares the weights; the gradients are summed in group order. A run's bits then depend on
// the group count, not on the thread count, and equal the one-group run to rounding (tested).
//
// Checkpoints: the file format is mixlab/train/checkpoint.h. A checkpoint whose parameters are
// not all finite is never written (checkpoint_save throws; the previous file is kept).
//
// Divergence: a non-finite loss or gradient norm stops the run with NonFiniteError before the
// optimiser step, so the weights and the last checkpoint stay finite. TrainOptions::skip_nonfinite
// lets up to N such steps be skipped instead (no update; the step counter advances); N counts over
// the whole run: the steps a checkpoint skipped before a --resume are counted (TrainLoopState).
//
// Resume: the checkpoint carries the loop's own state too (TrainLoopState, checkpoint.h): the log
// window in progress (so the first line after a resume, and result.json's train_loss, average the
// same steps as an uninterrupted run), the skipped steps, and an early stop (stop_at): a stopped
// run resumed with the same stop_at takes no further step and ends as it did at the stopped step
// (final checkpoint, evaluation and metrics line written once); another stop_at on the resume
// is a new rule, and the run trains on under it. The log window ends at log_every steps only: a
// run ending at --until between two of them reports the steps so far and carries the window on.
//
// Progress (stderr): one line every log_every steps: step, loss, accuracy (lm: perplexity),
// tokens/s, ETA.
// Metrics (JSONL, optional): {"step","loss","acc","lr","tokens_per_s","length"} per log line and
// {"step","eval_loss","eval_token_acc","eval_answer_acc","eval_chain_acc","eval_hop_acc"} per evaluation
// (eval_hop_acc: query accuracy per number of links, index 0 = direct recall; recall/multihop).
// Task lm adds "ppl" to the training lines and "eval_ppl", "eval_bpb" to the evaluation lines; its
// evaluation is the sliding-window score of the valid stream (lm_evaluate_split), not batches.
// Each line is fdatasync'ed (AppendFile); on resume the file is first cut back to the lines of
// steps <= the checkpoint's.
//
// Data parallel (mixlab/dist/data_parallel.h, set_data_parallel): with N processes every rank
// draws the same global batch of step s, trains on its own B/N rows, and the gradients are summed
// across ranks before clipping. The loss of each rank is divided by the answer positions of the
// whole global batch, so the summed gradient is the gradient of the one-process loss: N processes
// at global batch B follow the one-process run at batch B up to float rounding (tested). Rank 0
// alone writes progress, metrics and checkpoints; every rank evaluates the full held-out set
// (identical results) and can resume from the same checkpoint.
//
// Not supported: multiple devices, mixed precision, gradient accumulation.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/dist/gradient_reducer.h"
#include "mixlab/model/model.h"
#include "mixlab/train/checkpoint.h"
#include "mixlab/train/config.h"
#include "mixlab/train/tasks.h"

namespace mixlab {

class DataParallel;
class GradientReducer;
class RowGroups;

struct EvalResult {
  double loss = 0;        // mean cross-entropy per answer token
  double token_acc = 0;   // fraction of answer tokens predicted right (argmax)
  double answer_acc = 0;  // fraction of whole answers (copy: sequence, recall/multihop: query) all right
  int64_t answer_tokens = 0;
  int64_t answers = 0;
  // Multihop: accuracy on the queries whose answer follows at least one link (the chains), and
  // how many there were; the queries answered by a stored value are plain recall. 0 / 0 for
  // the other tasks.
  double chain_acc = 0;
  int64_t chain_queries = 0;
  // Recall/multihop: query accuracy by the number of links its answer follows (index 0 = the
  // stored value itself, k = a chain of k links); empty for the other tasks.
  std::vector<double> hop_acc;
  std::vector<int64_t> hop_queries;
  // lm: bits per byte of the scored valid text (mixlab/train/lm_eval.h) and its byte count;
  // perplexity = exp(loss). 0 for the other tasks.
  double bits_per_byte = 0;
  int64_t scored_bytes = 0;
};

/// Loss and metrics of logits (B,T,V) against a batch. `loss` keeps the autograd graph.
struct BatchScore {
  torch::Tensor loss;  // scalar
  int64_t correct_tokens = 0, answer_tokens = 0, correct_answers = 0, answers = 0;
  int64_t correct_chains = 0, chains = 0;         // query positions with hops >= 1
  std::vector<int64_t> hop_queries, hop_correct;  // per number of links (index), query positions
  int64_t batch_tokens = 0;                       // B*T, all positions the model processed
  bool finite = true;                             // train_step: false when the step was skipped
};
/// `loss_normalizer` > 0 divides the summed loss by it instead of by this batch's answer positions
/// (data parallel: the answer positions of the global batch, of which `batch` is a row slice).
BatchScore batch_score(const torch::Tensor& logits, const Batch& batch, double loss_normalizer = 0);

/// The trainer's optimiser for `params` under `config`: AdamW (lr, beta1, beta2, eps 1e-8) with
/// weight_decay on matrices (dim >= 2) and none on biases, norms and gates (a second group).
std::unique_ptr<torch::optim::AdamW> make_adamw(const TrainConfig& config, const std::vector<torch::Tensor>& params);

/// Rows [begin, begin + count) of every tensor of a batch (a rank's share of the global batch).
Batch batch_rows(const Batch& batch, int64_t begin, int64_t count);

struct TrainOptions {
  std::string checkpoint_path;  // "" = never write a checkpoint
  std::string resume_path;      // "" = start fresh
  std::string metrics_path;     // "" = no JSONL metrics (appended to on resume)
  int64_t until = 0;            // stop after this many completed steps (0 = config.steps)
  bool progress = true;         // progress lines on stderr
  std::string label;            // prefix of the progress lines (e.g. "attention/copy")
  int64_t skip_nonfinite = 0;   // steps with a non-finite loss/gradient to skip before stopping
};

struct TrainResult {
  int64_t step = 0;            // steps completed
  double last_loss = 0;        // mean training loss over the last log window
  double last_acc = 0;         // mean training token accuracy over the last log window
  EvalResult eval;             // held-out evaluation at the end of the run
  double tokens_per_s = 0;     // training tokens (B*T per step) per second, this run
  double seconds = 0;          // wall time of the training steps of this run
  int64_t skipped_steps = 0;   // non-finite steps skipped, the run's before a --resume included
  bool stopped_early = false;  // config.stop_at reached at an evaluation: `step` is where
  int64_t world_size = 1;      // processes that trained together (data parallel)
  // Data parallel, this rank: wall seconds from the end of its backward to the reduced gradients,
  // split into the wait for the slowest rank's backward to end (peer_wait_seconds) and the rest,
  // the all-reduce itself (all_reduce_seconds; its part overlapped with backward is not counted).
  // The split compares the ranks' wall clocks: exact on one machine, as good as their clock
  // synchronisation across machines. The last step's wait is all counted as all-reduce.
  double all_reduce_seconds = 0;
  double peer_wait_seconds = 0;
};

class Trainer {
 public:
  /// Builds the model (seeded) and optimiser. `factory` defaults to the registry for config.mixer.
  explicit Trainer(TrainConfig config, MixerFactory factory = nullptr);
  ~Trainer();

  /// Trains (resuming from options.resume_path if set). Throws NonFiniteError on divergence.
  TrainResult run(const TrainOptions& options);
  /// Trains, resuming from an already read checkpoint (options.resume_path names it).
  TrainResult run(const TrainOptions& options, const LoadedCheckpoint& resume);
  /// Joins a data-parallel launch (null: train alone). Rank 0's weights are broadcast to every
  /// rank; config.batch must be divisible by the world size. Only rank 0 writes progress,
  /// metrics and checkpoints from then on. Gradients are reduced in buckets of at most
  /// `bucket_bytes`, each started during backward as soon as its gradients exist.
  void set_data_parallel(DataParallel* dp, int64_t bucket_bytes = kDefaultGradientBucketBytes);
  /// One optimisation step on the batch of the current step; returns its score (with data
  /// parallel: the loss and counts of the whole global batch).
  BatchScore train_step();
  /// The row groups a step splits its batch into (config key row_groups; 0 resolves to the
  /// calling thread's intra-op thread count, at most batch; 1 with data parallel).
  int64_t row_groups() const;
  /// The threads those groups run on: min(row_groups(), the calling thread's intra-op threads).
  int64_t row_group_threads() const;
  /// Held-out evaluation over config.eval_batches batches of config.eval_batch rows, of the split
  /// the run reports (task_report_split: lm's valid stream, every other task's test split).
  EvalResult evaluate();
  /// The same on `split` (tasks.h, EvalSplit; task file has only kTest).
  EvalResult evaluate(EvalSplit split);
  /// The split stop_at decides on: kValid, apart from the reported split (for lm the same; task
  /// file has one held-out set, kTest).
  EvalSplit stop_split() const;
  /// The held-out accuracy config.stop_at is compared with: answer accuracy, token accuracy for lm.
  double stop_metric(const EvalResult& e) const;

  /// Starts from another run's weights (`train --init-from`): copies the checkpoint's model
  /// parameters and buffers into this model. The optimiser, step, schedule and RNG stay this
  /// run's own (fresh). The configs must agree on config_weights_mismatch's keys and every tensor
  /// on its shape; else mixlab::Error naming the key or tensor, and this model is unchanged.
  void init_weights(const LoadedCheckpoint& checkpoint);

  void checkpoint_save(const std::string& path) const;
  /// Loads model, optimiser, step and RNG; the checkpoint's config must match (resume rules).
  void checkpoint_load(const std::string& path);
  void checkpoint_load(const LoadedCheckpoint& checkpoint);

  const TrainConfig& config() const { return config_; }
  DecoderModel& model() { return *model_; }
  std::shared_ptr<DecoderModel> model_ptr() { return model_; }
  int64_t step() const { return step_; }
  /// The loop state a checkpoint of now would store (window, skipped steps, early stop).
  const TrainLoopState& loop_state() const { return loop_; }
  /// The learning rate the optimiser holds (every parameter group has the same): the schedule's
  /// value at the last step taken, also after a resume, as the checkpoint stores it.
  double optimizer_lr() const;

 private:
  TrainConfig config_;
  MixerFactory factory_;
  std::shared_ptr<DecoderModel> model_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t step_ = 0;
  int64_t skip_nonfinite_ = 0;
  TrainLoopState loop_;  // saved in and restored from checkpoints with the weights
  DataParallel* dp_ = nullptr;
  std::unique_ptr<GradientReducer> reducer_;  // with dp_: the gradient all-reduce, overlapped with backward
  std::unique_ptr<RowGroups> row_groups_;     // row_groups() > 1: the replicas and their threads
  struct DataParallelTiming {
    double exposed_seconds = 0;        // backward end -> reduced gradients, summed over steps
    double peer_wait_seconds = 0;      // of which waiting for a slower rank's backward
    double previous_backward_end = 0;  // wall-clock seconds; 0 before the first step of a run
    double previous_exposed = 0;
  } dp_timing_;

  TrainResult run_loop(const TrainOptions& options);
};

/// Model dims for a config (max_len = config_max_len: the key, or the task's longest sequence).
ModelDims model_dims_for(const TrainConfig& config);

}  // namespace mixlab
