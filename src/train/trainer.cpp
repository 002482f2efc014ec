// Training loop, held-out evaluation, resume and init-from rules (see trainer.h; the checkpoint
// file itself is checkpoint.cpp).
#include "mixlab/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "mixlab/analysis/format.h"
#include "mixlab/core/atomic_file.h"
#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/core/threads.h"
#include "mixlab/dist/data_parallel.h"
#include "mixlab/dist/gradient_reducer.h"
#include "mixlab/train/lm_eval.h"
#include "mixlab/train/row_groups.h"

namespace mixlab {
namespace {

// Seconds since the epoch on the wall clock: the one clock that ranks on one machine share.
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

ModelDims model_dims_for(const TrainConfig& c) {
  ModelDims d;
  d.vocab = c.task.vocab;
  d.d_model = c.d_model;
  d.layers = c.layers;
  d.heads = c.heads;
  d.mlp_ratio = c.mlp_ratio;
  d.max_len = config_max_len(c);
  return d;
}

Batch batch_rows(const Batch& batch, int64_t begin, int64_t count) {
  const int64_t B = batch.tokens.size(0);
  MIXLAB_CHECK(begin >= 0 && count >= 1 && begin + count <= B, "batch_rows: rows [{}, {}) outside the batch of {} rows",
               begin, begin + count, B);
  auto rows = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, begin, count) : t; };
  Batch r = batch;
  r.tokens = rows(batch.tokens);
  r.targets = rows(batch.targets);
  r.mask = rows(batch.mask);
  r.answer = rows(batch.answer);
  r.hops = rows(batch.hops);
  return r;
}

BatchScore batch_score(const torch::Tensor& logits, const Batch& batch, double loss_normalizer) {
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  MIXLAB_CHECK(logits.dim() == 3 && logits.size(0) == B && logits.size(1) == T,
               "batch_score: logits must have shape (B,T,V) = ({},{},V), got {}", B, T,
               fmt::format("[{}]", fmt::join(logits.sizes(), ",")));
  BatchScore s;
  s.batch_tokens = B * T;
  const auto V = logits.size(2);
  // Cross-entropy in float32 at least (float64 logits stay float64).
  auto nll =
      torch::nn::functional::cross_entropy(logits.reshape({B * T, V}), batch.targets.reshape({B * T}),
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto mask = batch.mask.reshape({B * T}).to(nll.scalar_type());
  const double n_mask = mask.sum().item<double>();
  MIXLAB_CHECK(n_mask > 0 || loss_normalizer > 0, "batch_score: the batch has no answer positions");
  s.loss = (nll * mask).sum() / (loss_normalizer > 0 ? loss_normalizer : n_mask);

  torch::NoGradGuard no_grad;
  auto pred = logits.argmax(2);                       // (B,T)
  auto answer_pos = batch.mask > 0;                   // (B,T) bool
  auto wrong = (pred != batch.targets) & answer_pos;  // (B,T)
  s.answer_tokens = static_cast<int64_t>(n_mask);
  s.correct_tokens = s.answer_tokens - wrong.sum().item<int64_t>();
  // Whole answers: per row, count wrong tokens per answer id. Scored positions outside every
  // answer (answer = -1: multihop link labels) count for token accuracy only.
  const int64_t A = std::max<int64_t>(1, batch.answer.max().item<int64_t>() + 1);
  auto idx = batch.answer.clamp_min(0);
  auto in_answer = answer_pos & (batch.answer >= 0);
  auto errs = torch::zeros({B, A}, torch::kInt64).scatter_add_(1, idx, (wrong & in_answer).to(torch::kInt64));
  auto present = torch::zeros({B, A}, torch::kInt64).scatter_add_(1, idx, in_answer.to(torch::kInt64)) > 0;
  s.answers = present.sum().item<int64_t>();
  s.correct_answers = (present & (errs == 0)).sum().item<int64_t>();
  if (batch.hops.defined()) {
    auto chain = answer_pos & (batch.hops >= 1);
    s.chains = chain.sum().item<int64_t>();
    s.correct_chains = s.chains - (wrong & chain).sum().item<int64_t>();
    auto query = (answer_pos & (batch.hops >= 0)).reshape({-1});
    if (query.any().item<bool>()) {
      auto links = batch.hops.reshape({-1}).masked_select(query);
      auto right = (~wrong).reshape({-1}).masked_select(query).to(torch::kFloat64);
      auto n = torch::bincount(links).contiguous(), ok = torch::bincount(links, right).contiguous();
      for (int64_t k = 0; k < n.numel(); ++k) {
        s.hop_queries.push_back(n[k].item<int64_t>());
        s.hop_correct.push_back(static_cast<int64_t>(ok[k].item<double>() + 0.5));
      }
    }
  }
  return s;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const TrainConfig& config, const std::vector<torch::Tensor>& params) {
  // Weight decay only on matrices (dim >= 2): biases, norms and gates are not decayed.
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto opts = torch::optim::AdamWOptions(config.lr)
                  .betas(std::make_tuple(config.beta1, config.beta2))
                  .eps(1e-8)
                  .weight_decay(config.weight_decay);
  auto opts_nd = opts;
  opts_nd.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(opts));
  if (!no_decay.empty()) groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(opts_nd));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), opts);
}

Trainer::Trainer(TrainConfig config, MixerFactory factory) : config_(std::move(config)) {
  config_validate(config_, "(in code)");
  // Refuse before LibTorch allocates: an absurd config must be an error, not an OOM kill.
  config_check_memory(config_, machine_memory_bytes(), "(in code)", "this machine's memory");
  factory_ = factory ? std::move(factory) : mixer_factory_from_spec(config_.mixer, config_.layers);
  torch::manual_seed(config_.seed);
  model_ = std::make_shared<DecoderModel>(model_dims_for(config_), factory_);
  optimizer_ = make_adamw(config_, model_->parameters());
}

Trainer::~Trainer() = default;

void Trainer::set_data_parallel(DataParallel* dp, int64_t bucket_bytes) {
  if (dp && dp->world_size() > 1) {
    MIXLAB_CHECK(config_.batch % dp->world_size() == 0,
                 "key 'batch' = {} must be divisible by the number of processes {} (each trains on batch / {} rows)",
                 config_.batch, dp->world_size(), dp->world_size());
    std::vector<torch::Tensor> state;
    for (auto& p : model_->parameters()) state.push_back(p);
    for (auto& b : model_->buffers()) state.push_back(b);
    dp->broadcast(state);
  }
  if (dp) config_check_row_groups_for_processes(config_, dp->world_size());
  dp_ = dp && dp->world_size() > 1 ? dp : nullptr;
  row_groups_.reset();
  reducer_.reset();
  if (dp_) reducer_ = std::make_unique<GradientReducer>(*dp_, model_->parameters(), bucket_bytes);
}

int64_t Trainer::row_groups() const {
  if (dp_) return 1;
  const int64_t wanted = config_.row_groups > 0 ? config_.row_groups : static_cast<int64_t>(at::get_num_threads());
  return std::clamp<int64_t>(wanted, 1, config_.batch);
}

int64_t Trainer::row_group_threads() const { return std::min<int64_t>(row_groups(), at::get_num_threads()); }

BatchScore Trainer::train_step() {
  model_->train();
  Batch batch = task_train_batch(config_.task, config_.batch, step_, config_.steps, config_.seed);
  const double lr = config_lr_at(config_, step_);
  for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  optimizer_->zero_grad();
  double normalizer = 0;
  if (dp_) {
    // Every rank drew the same global batch; it trains on its rows, normalised by the global
    // answer count, so the summed gradients are those of the one-process loss.
    normalizer = batch.mask.sum().item<double>();
    const int64_t rows = config_.batch / dp_->world_size();
    batch = batch_rows(batch, dp_->rank() * rows, rows);
  }
  const int64_t groups = row_groups();
  BatchScore s;
  // With row groups every thread runs whole operations, this one included, to the step's end:
  // a team of OpenMP threads forked for clipping or AdamW would spin on the cores the next
  // step's groups run on.
  std::optional<ThisThreadIntraOpThreads> whole_operations;
  if (groups > 1) {
    // The batch's rows on `groups` threads (row_groups.h): forward and backward run there, and
    // the summed gradient lands in the model's parameters as one backward would have left it.
    const int64_t threads = row_group_threads();
    if (!row_groups_ || row_groups_->groups() != groups || row_groups_->threads() != threads) {
      row_groups_.reset();
      row_groups_ = std::make_unique<RowGroups>(
          model_, [this] { return std::make_shared<DecoderModel>(model_dims_for(config_), factory_); }, groups,
          threads);
    }
    whole_operations.emplace(1);
    s = row_groups_->forward_backward(batch);
  } else if (dp_) {
    s = batch_score(model_->forward(batch.tokens), batch, normalizer);
    // The step statistics are known before backward: their (tiny) sum runs while backward does,
    // first in the collective order, then the gradient buckets as their gradients arrive. Each
    // rank also puts, in its own slot, the wall-clock time its previous backward ended: the
    // latest of those says how much of that step's wait was for a slower rank.
    const int64_t W = dp_->world_size();
    std::vector<double> stats_values(static_cast<size_t>(4 + W), 0.0);
    stats_values[0] = s.loss.item<double>();
    stats_values[1] = static_cast<double>(s.correct_tokens);
    stats_values[2] = static_cast<double>(s.answer_tokens);
    stats_values[3] = static_cast<double>(s.batch_tokens);
    stats_values[static_cast<size_t>(4 + dp_->rank())] = dp_timing_.previous_backward_end;
    auto stats = torch::tensor(stats_values, torch::kFloat64);
    PendingCollective stats_sum = dp_->start_all_reduce_sum(stats, "all-reduce of the step statistics");
    reducer_->begin();
    s.loss.backward();
    const auto backward_end = std::chrono::steady_clock::now();
    const double backward_end_wall = wall_seconds();
    stats_sum.wait();
    reducer_->finish();
    const double exposed = std::chrono::duration<double>(std::chrono::steady_clock::now() - backward_end).count();
    const double* sums = stats.data_ptr<double>();
    // The previous step's wait for the slowest rank (skipped when some rank had no previous step).
    const double latest_previous_end = *std::max_element(sums + 4, sums + 4 + W);
    if (*std::min_element(sums + 4, sums + 4 + W) > 0) {
      dp_timing_.peer_wait_seconds +=
          std::clamp(latest_previous_end - dp_timing_.previous_backward_end, 0.0, dp_timing_.previous_exposed);
    }
    dp_timing_.exposed_seconds += exposed;
    dp_timing_.previous_backward_end = backward_end_wall;
    dp_timing_.previous_exposed = exposed;
    s.loss = torch::tensor(sums[0], torch::kFloat64);
    s.correct_tokens = static_cast<int64_t>(sums[1]);
    s.answer_tokens = static_cast<int64_t>(sums[2]);
    s.batch_tokens = static_cast<int64_t>(sums[3]);
  } else {
    s = batch_score(model_->forward(batch.tokens), batch, normalizer);
    s.loss.backward();
  }
  const double loss = s.loss.item<double>();
  // The library's clipping and AdamW step, not the fused pass of fused_adamw.h: that one saves
  // about 0.1 ms of a 49 ms lm step (bench_train) and rounds differently, which moved the main
  // job's recall results (the dense recurrence 96.5 -> 62.7 %, 2026-11-27).
  const double grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.grad_clip);
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    // A non-finite step must not reach the weights (or Adam's moments): no optimizer step.
    s.finite = false;
    if (loop_.skipped < skip_nonfinite_) {
      ++loop_.skipped;
      ++step_;
      return s;
    }
    throw NonFiniteError(fmt::format(
        "train: non-finite {} at step {} (loss {}, gradient norm {}; key 'lr' = {:g}, lr at this step {:g}); "
        "stopped before updating the weights",
        std::isfinite(loss) ? "gradient" : "loss", step_ + 1, loss, grad_norm, config_.lr, lr));
  }
  optimizer_->step();
  ++step_;
  return s;
}

EvalResult Trainer::evaluate() { return evaluate(task_report_split(config_.task)); }

EvalSplit Trainer::stop_split() const { return config_.task.name == "file" ? EvalSplit::kTest : EvalSplit::kValid; }

EvalResult Trainer::evaluate(EvalSplit split) {
  if (config_.task.name == "lm") {
    const LmEvalResult e =
        lm_evaluate_split(*model_, config_, split == EvalSplit::kValid ? LmSplit::kValid : LmSplit::kTest);
    EvalResult r;
    r.loss = e.loss();
    r.answer_tokens = e.tokens;
    r.token_acc = e.tokens > 0 ? static_cast<double>(e.correct) / static_cast<double>(e.tokens) : 0.0;
    r.bits_per_byte = e.bytes > 0 ? e.bits_per_byte() : 0.0;
    r.scored_bytes = e.bytes;
    return r;
  }
  torch::NoGradGuard no_grad;
  model_->eval();
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, correct_answers = 0, correct_chains = 0;
  std::vector<int64_t> hop_correct;
  const int64_t batches = task_eval_batch_count(config_.task, config_.eval_batch, config_.eval_batches);
  for (int64_t i = 0; i < batches; ++i) {
    const Batch batch = task_eval_batch(config_.task, config_.eval_batch, i, config_.seed, split);
    const BatchScore s = batch_score(model_->forward(batch.tokens), batch);
    loss_sum += s.loss.item<double>() * static_cast<double>(s.answer_tokens);
    r.answer_tokens += s.answer_tokens;
    correct += s.correct_tokens;
    r.answers += s.answers;
    correct_answers += s.correct_answers;
    r.chain_queries += s.chains;
    correct_chains += s.correct_chains;
    if (hop_correct.size() < s.hop_correct.size()) hop_correct.resize(s.hop_correct.size(), 0);
    if (r.hop_queries.size() < s.hop_queries.size()) r.hop_queries.resize(s.hop_queries.size(), 0);
    for (size_t k = 0; k < s.hop_queries.size(); ++k)
      r.hop_queries[k] += s.hop_queries[k], hop_correct[k] += s.hop_correct[k];
  }
  r.loss = loss_sum / static_cast<double>(r.answer_tokens);
  r.token_acc = static_cast<double>(correct) / static_cast<double>(r.answer_tokens);
  r.answer_acc = r.answers > 0 ? static_cast<double>(correct_answers) / static_cast<double>(r.answers) : 0.0;
  r.chain_acc = r.chain_queries > 0 ? static_cast<double>(correct_chains) / static_cast<double>(r.chain_queries) : 0.0;
  for (size_t k = 0; k < r.hop_queries.size(); ++k)
    r.hop_acc.push_back(
        r.hop_queries[k] > 0 ? static_cast<double>(hop_correct[k]) / static_cast<double>(r.hop_queries[k]) : 0.0);
  model_->train();
  return r;
}

void Trainer::checkpoint_save(const std::string& path) const {
  // Never write a checkpoint that cannot be trained on: the previous finite one is kept instead.
  for (const auto& item : model_->named_parameters()) {
    MIXLAB_CHECK(torch::isfinite(item.value()).all().item<bool>(),
                 "{}: not written: parameter '{}' has non-finite values at step {} (the previous checkpoint, if "
                 "any, is kept)",
                 checkpoint_prefix(path), item.key(), step_);
  }
  checkpoint_write(path, config_, step_, *model_, *optimizer_, loop_);
}

void Trainer::checkpoint_load(const std::string& path) { checkpoint_load(checkpoint_read(path)); }

void Trainer::checkpoint_load(const LoadedCheckpoint& c) {
  const std::string& path = c.path;
  const std::string mismatch = config_resume_mismatch(c.config, config_);
  MIXLAB_CHECK(mismatch.empty(), "{}: was written with a different config: {}", checkpoint_prefix(path), mismatch);
  MIXLAB_CHECK(c.step <= config_.steps, "{}: entry 'step' must be an integer in [0, {}]", checkpoint_prefix(path),
               config_.steps);
  checkpoint_load_training_state(c, *model_, *optimizer_);
  step_ = c.step;
  loop_ = c.loop;
  // LibTorch's load restores the optimiser's state but keeps the options it was built with (lr =
  // the config's), while a run that was never interrupted holds the last step's scheduled lr. Set
  // it, so that a resumed run that takes no further step (resumed at its last step, the soak
  // found) saves the same checkpoint as the uninterrupted one.
  if (step_ > 0) {
    const double lr = config_lr_at(config_, step_ - 1);
    for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
  }
}

double Trainer::optimizer_lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(optimizer_->param_groups().front().options()).lr();
}

void Trainer::init_weights(const LoadedCheckpoint& c) {
  const std::string& path = c.path;
  const std::string mismatch = config_weights_mismatch(c.config, config_);
  MIXLAB_CHECK(mismatch.empty(), "{}: its weights cannot start this model: {}", checkpoint_prefix(path), mismatch);
  // Module::load replaces each tensor whatever its shape, so the archive goes into a scratch model
  // of this config first; only after every name and shape matched are the values copied into the
  // live tensors (the ones the optimiser holds). Building the scratch model draws its own init:
  // the global generator is put back, so this run's randomness does not depend on the flag.
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const torch::Tensor rng = gen.get_state();
  auto scratch = std::make_shared<DecoderModel>(model_dims_for(config_), factory_);
  gen.set_state(rng);
  checkpoint_load_model(c, *scratch);
  using Named = torch::OrderedDict<std::string, torch::Tensor>;
  const std::pair<Named, Named> kinds[] = {{scratch->named_parameters(), model_->named_parameters()},
                                           {scratch->named_buffers(), model_->named_buffers()}};
  for (const auto& [from, to] : kinds) {
    for (const auto& item : to) {
      const torch::Tensor* src = from.find(item.key());
      MIXLAB_CHECK(src != nullptr, "{}: has no tensor '{}'", checkpoint_prefix(path), item.key());
      MIXLAB_CHECK(src->sizes() == item.value().sizes(), "{}: tensor '{}' has shape {} but this model's is {}",
                   checkpoint_prefix(path), item.key(), shape_string(*src), shape_string(item.value()));
    }
  }
  torch::NoGradGuard no_grad;
  for (const auto& [from, to] : kinds) {
    for (const auto& item : to) item.value().copy_(*from.find(item.key()));
  }
}

namespace {

// Keeps the metrics lines of steps <= `step` (the checkpoint's) so a resumed run appends after
// them without duplicates; a torn last line (a kill mid-write) is dropped too. Returns the
// cumulative "tokens" and "seconds" of the last kept line that has them (0, 0 when none): the
// resumed run counts on from there, so curves against tokens or wall time continue across a
// resume (the time between the runs is not counted). `drop_final_eval`: the checkpoint is the
// run's last step, whose final evaluation the resumed run writes again (a run killed after that
// line, before it exited, used to end with the line twice), so evaluation lines at `step` go.
// `stopped`: the checkpoint is where stop_at stopped the run; its final evaluation is the line
// after the "stopped_early" line at `step` (the periodic evaluation that decided comes before it,
// and stays), so the lines at `step` after that one go.
std::pair<double, double> metrics_truncate_to_step(const std::string& path, int64_t step, bool drop_final_eval,
                                                   bool stopped) {
  std::pair<double, double> totals{0, 0};
  if (::access(path.c_str(), F_OK) != 0) return totals;
  const std::string text = file_read(path, int64_t{1} << 30, "metrics file");
  std::string kept;
  size_t begin = 0;
  bool after_stop = false;  // past the "stopped_early" line at `step`
  while (begin < text.size()) {
    const size_t nl = text.find('\n', begin);
    if (nl == std::string::npos) break;  // torn last line
    const std::string line = text.substr(begin, nl - begin);
    begin = nl + 1;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool at_step =
        j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() == step;
    const bool final_eval = stopped ? at_step && after_stop : drop_final_eval && at_step && j.contains("eval_loss");
    if (stopped && at_step && j.contains("stopped_early")) after_stop = true;
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() <= step &&
        !final_eval) {
      kept += line + "\n";
      if (j.contains("tokens") && j["tokens"].is_number() && j.contains("seconds") && j["seconds"].is_number())
        totals = {j["tokens"].get<double>(), j["seconds"].get<double>()};
    }
  }
  if (kept.size() != text.size()) atomic_write_file(path, kept);
  return totals;
}

}  // namespace

double Trainer::stop_metric(const EvalResult& e) const {
  return config_.task.name == "lm" ? e.token_acc : e.answer_acc;
}

TrainResult Trainer::run(const TrainOptions& o) {
  if (!o.resume_path.empty()) checkpoint_load(o.resume_path);
  return run_loop(o);
}

TrainResult Trainer::run(const TrainOptions& o, const LoadedCheckpoint& resume) {
  checkpoint_load(resume);
  return run_loop(o);
}

TrainResult Trainer::run_loop(const TrainOptions& o) {
  const int64_t until = o.until > 0 ? std::min(o.until, config_.steps) : config_.steps;
  MIXLAB_CHECK(until >= step_, "train: --until {} is before the checkpoint's step {}", until, step_);
  MIXLAB_CHECK(o.skip_nonfinite >= 0, "train: --skip-nonfinite must be >= 0, got {}", o.skip_nonfinite);
  skip_nonfinite_ = o.skip_nonfinite;  // loop_.skipped counts on from the checkpoint (the whole run's budget)
  dp_timing_ = {};
  // A run that stop_at stopped (in this object, or in the checkpoint it resumed) takes no further
  // step while stop_at is the one that decided; another stop_at is a new rule, and the run goes on.
  if (loop_.stopped_step > 0 && (loop_.stopped_step != step_ || loop_.stop_at != config_.stop_at)) {
    loop_.stopped_step = 0;
    loop_.stop_at = 0;
  }
  const bool stopped = loop_.stopped_step > 0;

  // Data parallel: rank 0 alone speaks and writes; the others train and evaluate silently.
  const bool writer = !dp_ || dp_->rank() == 0;
  const bool progress = o.progress && writer;
  const std::string checkpoint_path = writer ? o.checkpoint_path : std::string();
  AppendFile metrics;
  std::pair<double, double> metrics_offset{0, 0};  // tokens and seconds of the runs before a resume
  if (!o.metrics_path.empty() && writer) {
    const bool resumed = step_ > 0;
    if (resumed) {
      metrics_offset = metrics_truncate_to_step(o.metrics_path, step_, /*drop_final_eval=*/step_ == until, stopped);
    }
    metrics = AppendFile(o.metrics_path, /*truncate=*/!resumed);
  }
  const std::string label = o.label.empty() ? "" : o.label + " ";
  int64_t checkpoint_step = step_;
  bool checkpoint_written = !o.resume_path.empty() && o.resume_path == checkpoint_path;

  TrainResult result;
  result.last_loss = loop_.last_loss;  // the last window reported before a resume, until a new one
  result.last_acc = loop_.last_acc;
  result.stopped_early = stopped;
  if (stopped && progress)
    std::cerr << fmt::format(
        "{}step {}: the checkpoint's run stopped here (stop_at {:.2f}% reached): no further step\n", label, step_,
        100 * config_.stop_at);
  const int64_t first = step_;
  const auto t0 = Clock::now();
  // The log window's sums are loop_'s (checkpointed); its tokens and clock are this process's
  // (tokens_per_s is a measurement of this run).
  int64_t tokens = 0, window_tokens = 0;
  auto win_t0 = Clock::now();
  while (!stopped && step_ < until) {
    BatchScore s;
    try {
      s = train_step();
    } catch (const NonFiniteError& e) {
      const std::string kept = checkpoint_path.empty() ? std::string("no checkpoint path was given")
                               : checkpoint_written
                                   ? fmt::format("the last checkpoint '{}' (step {}, finite parameters) is kept",
                                                 checkpoint_path, checkpoint_step)
                                   : std::string("no checkpoint was written");
      throw NonFiniteError(
          fmt::format("{}; {}. Lower 'lr' (or 'grad_clip'), or pass --skip-nonfinite N", e.what(), kept));
    }
    const int64_t step_tokens = s.batch_tokens;
    tokens += step_tokens;
    window_tokens += step_tokens;
    if (s.finite) {
      loop_.window_loss += s.loss.item<double>();
      ++loop_.window_steps;
      loop_.window_correct += s.correct_tokens;
      loop_.window_answer_tokens += s.answer_tokens;
    } else {
      result.skipped_steps = loop_.skipped;
      if (progress) std::cerr << fmt::format("{}step {}: non-finite loss or gradient, step skipped\n", label, step_);
    }
    const bool last = step_ == until;
    const bool window_end = step_ % config_.log_every == 0;
    if ((window_end || last) && loop_.window_steps > 0) {
      const double win_s = seconds_since(win_t0);
      const double rate = win_s > 0 ? static_cast<double>(window_tokens) / win_s : 0.0;
      const double elapsed = seconds_since(t0);
      const double eta = elapsed / static_cast<double>(step_ - first) * static_cast<double>(until - step_);
      result.last_loss = loop_.window_loss / static_cast<double>(loop_.window_steps);
      result.last_acc = static_cast<double>(loop_.window_correct) /
                        static_cast<double>(std::max<int64_t>(1, loop_.window_answer_tokens));
      loop_.last_loss = result.last_loss;
      loop_.last_acc = result.last_acc;
      const bool lm = config_.task.name == "lm";
      if (progress) {
        const std::string quality = lm ? fmt::format("ppl {:.2f}", std::exp(result.last_loss))
                                       : fmt::format("acc {:.1f}%", 100.0 * result.last_acc);
        std::cerr << fmt::format("{}step {}/{} loss {:.4f} {} tok/s {} ETA {}\n", label, step_, config_.steps,
                                 result.last_loss, quality, format_rate(rate), format_duration(eta));
      }
      if (metrics.is_open()) {
        nlohmann::json j = {{"step", step_},
                            {"loss", result.last_loss},
                            {"acc", result.last_acc},
                            {"lr", config_lr_at(config_, step_ - 1)},
                            {"tokens_per_s", rate},
                            // Cumulative over the run (and the runs it resumes): curves against
                            // tokens trained or wall time (`mixlab plot --x`).
                            {"tokens", metrics_offset.first + static_cast<double>(tokens)},
                            {"seconds", metrics_offset.second + seconds_since(t0)}};
        if (lm) j["ppl"] = std::exp(result.last_loss);
        metrics.append_line(j.dump());
      }
      // The window ends at a log_every step; a line at --until between two of them reports the
      // steps so far, and the window goes on (in the checkpoint too), so that the run resumed from
      // there reports the window of an uninterrupted one.
      if (window_end) {
        loop_.window_loss = 0;
        loop_.window_steps = loop_.window_correct = loop_.window_answer_tokens = 0;
      }
      window_tokens = 0;
      win_t0 = Clock::now();
    }
    const bool eval_now = config_.eval_every > 0 && step_ % config_.eval_every == 0 && !last;
    if (eval_now) {
      const EvalResult e = evaluate();
      // stop_at decides on the validation split, apart from the reported one (tasks.h, EvalSplit).
      const bool stop_apart = config_.stop_at > 0 && stop_split() != task_report_split(config_.task);
      const EvalResult stop_eval = stop_apart ? evaluate(stop_split()) : e;
      if (metrics.is_open()) {
        nlohmann::json j = {{"step", step_},
                            {"eval_loss", e.loss},
                            {"eval_token_acc", e.token_acc},
                            {"eval_answer_acc", e.answer_acc},
                            {"eval_chain_acc", e.chain_acc},
                            {"eval_hop_acc", e.hop_acc},
                            {"eval_hop_queries", e.hop_queries}};
        if (config_.task.name == "lm") j["eval_ppl"] = std::exp(e.loss), j["eval_bpb"] = e.bits_per_byte;
        if (stop_apart) j["valid_acc"] = stop_metric(stop_eval);
        metrics.append_line(j.dump());
      }
      // Early stop: every rank evaluates the same batches on the same weights, so all decide alike.
      if (config_.stop_at > 0 && stop_metric(stop_eval) >= config_.stop_at) {
        result.stopped_early = true;
        loop_.stopped_step = step_;  // in the final checkpoint: a resume does not train past it
        // train_loss of a run stopped between two log_every steps: the window in progress, as a
        // run that ended here (--until) reports it, not the window before (or 0 before the first).
        if (!window_end && loop_.window_steps > 0) {
          result.last_loss = loop_.last_loss = loop_.window_loss / static_cast<double>(loop_.window_steps);
          result.last_acc = loop_.last_acc = static_cast<double>(loop_.window_correct) /
                                             static_cast<double>(std::max<int64_t>(1, loop_.window_answer_tokens));
        }
        loop_.stop_at = config_.stop_at;
        if (progress)
          std::cerr << fmt::format("{}step {}: {} accuracy {:.2f}% >= stop_at {:.2f}%: stopping\n", label, step_,
                                   eval_split_name(stop_split()), 100 * stop_metric(stop_eval), 100 * config_.stop_at);
        if (metrics.is_open())
          metrics.append_line(
              nlohmann::json({{"step", step_}, {"stopped_early", true}, {"stop_at", config_.stop_at}}).dump());
        break;
      }
    }
    if (!checkpoint_path.empty() && config_.checkpoint_every > 0 && step_ % config_.checkpoint_every == 0 && !last) {
      checkpoint_save(checkpoint_path);
      checkpoint_written = true;
      checkpoint_step = step_;
    }
  }
  result.seconds = seconds_since(t0);
  result.tokens_per_s = result.seconds > 0 ? static_cast<double>(tokens) / result.seconds : 0.0;
  result.step = step_;
  result.skipped_steps = loop_.skipped;
  result.world_size = dp_ ? dp_->world_size() : 1;
  result.all_reduce_seconds = dp_timing_.exposed_seconds - dp_timing_.peer_wait_seconds;
  result.peer_wait_seconds = dp_timing_.peer_wait_seconds;
  if (!checkpoint_path.empty()) checkpoint_save(checkpoint_path);
  result.eval = evaluate();
  if (!std::isfinite(result.eval.loss)) {
    throw NonFiniteError(
        fmt::format("train: the final evaluation loss is non-finite ({}) at step {}", result.eval.loss, step_));
  }
  if (metrics.is_open()) {
    nlohmann::json j = {{"step", step_},
                        {"eval_loss", result.eval.loss},
                        {"eval_token_acc", result.eval.token_acc},
                        {"eval_answer_acc", result.eval.answer_acc},
                        {"eval_chain_acc", result.eval.chain_acc},
                        {"eval_hop_acc", result.eval.hop_acc},
                        {"eval_hop_queries", result.eval.hop_queries}};
    if (config_.task.name == "lm") {
      j["eval_ppl"] = std::exp(result.eval.loss);
      j["eval_bpb"] = result.eval.bits_per_byte;
    }
    metrics.append_line(j.dump());
  }
  return result;
}

}  // namespace mixlab
