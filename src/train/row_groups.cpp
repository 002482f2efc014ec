// One step's batch split by rows over threads (see row_groups.h).
#include "mixlab/train/row_groups.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <exception>

#include "mixlab/core/error.h"
#include "mixlab/core/threads.h"
#include "mixlab/model/init_lock.h"
#include "mixlab/train/config.h"
#include "mixlab/train/trainer.h"

namespace mixlab {

std::pair<int64_t, int64_t> row_group_range(int64_t rows, int64_t groups, int64_t g) {
  MIXLAB_CHECK(groups >= 1 && groups <= rows && g >= 0 && g < groups,
               "row_group_range: group {} of {} over {} rows (needs 1 <= groups <= rows)", g, groups, rows);
  const int64_t base = rows / groups, extra = rows % groups;
  return {g * base + std::min(g, extra), base + (g < extra ? 1 : 0)};
}

struct RowGroups::Group {
  int64_t index = 0;
  std::shared_ptr<DecoderModel> replica;
  std::vector<torch::Tensor> params, buffers;  // the replica's, in the model's named order
  BatchScore score;
  std::exception_ptr error;
};

namespace {

std::vector<torch::Tensor> named_values(const torch::OrderedDict<std::string, torch::Tensor>& d,
                                        std::vector<std::string>& names) {
  std::vector<torch::Tensor> out;
  for (const auto& item : d) {
    out.push_back(item.value());
    names.push_back(item.key());
  }
  return out;
}

// Points `replica` at `source`'s storage, shape and strides, unless it already does.
void alias(torch::Tensor& replica, const torch::Tensor& source) {
  if (replica.is_alias_of(source) && replica.sizes() == source.sizes() && replica.strides() == source.strides() &&
      replica.storage_offset() == source.storage_offset())
    return;
  torch::NoGradGuard no_grad;
  replica.set_(source);
}

}  // namespace

RowGroups::RowGroups(std::shared_ptr<DecoderModel> model, const ModelFactory& make_replica, int64_t groups,
                     int64_t threads)
    : model_(std::move(model)) {
  MIXLAB_CHECK(model_ != nullptr, "RowGroups: no model");
  MIXLAB_CHECK(groups >= 2 && groups <= kMaxRowGroups, "RowGroups: groups must be in [2, {}], got {}", kMaxRowGroups,
               groups);
  MIXLAB_CHECK(threads >= 1, "RowGroups: threads must be >= 1, got {}", threads);
  std::vector<std::string> param_names, buffer_names;
  params_ = named_values(model_->named_parameters(true), param_names);
  buffers_ = named_values(model_->named_buffers(true), buffer_names);
  for (int64_t i = 0; i < groups; ++i) {
    auto g = std::make_unique<Group>();
    g->index = i;
    {
      // The replica's own initialisation is thrown away (it aliases the model's tensors); it must
      // not move the global generator, which later draws and checkpoints depend on.
      std::lock_guard<std::mutex> init(model_init_mutex());
      auto gen = at::detail::getDefaultCPUGenerator();
      at::Tensor state;
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        state = gen.get_state();
      }
      g->replica = make_replica();  // its init takes the generator's mutex per draw
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
    }
    MIXLAB_CHECK(g->replica != nullptr, "RowGroups: the replica factory returned no model");
    std::vector<std::string> names, bnames;
    g->params = named_values(g->replica->named_parameters(true), names);
    g->buffers = named_values(g->replica->named_buffers(true), bnames);
    MIXLAB_CHECK(
        names == param_names && bnames == buffer_names,
        "RowGroups: the replica's tensors are not the model's ({} parameters and {} buffers against {} and {})",
        names.size(), bnames.size(), param_names.size(), buffer_names.size());
    for (size_t k = 0; k < params_.size(); ++k)
      MIXLAB_CHECK(g->params[k].sizes() == params_[k].sizes() && g->params[k].dtype() == params_[k].dtype(),
                   "RowGroups: the replica's parameter '{}' differs in shape or dtype", param_names[k]);
    g->replica->train();
    groups_.push_back(std::move(g));
  }
  // The calling thread runs groups too: threads - 1 more.
  const int64_t n_threads = std::min(threads, groups);
  for (int64_t t = 1; t < n_threads; ++t) workers_.emplace_back([this] { work(); });
}

RowGroups::~RowGroups() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : workers_) t.join();
}

void RowGroups::work() {
  ThisThreadIntraOpThreads one(1);
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_groups();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--running_ == 0) done_.notify_one();
  }
}

void RowGroups::run_groups() {
  for (;;) {
    int64_t g = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      g = next_group_++;
    }
    if (g >= groups()) return;
    run_group(*groups_[static_cast<size_t>(g)]);
  }
}

void RowGroups::run_group(Group& g) {
  g.error = nullptr;
  try {
    for (size_t k = 0; k < params_.size(); ++k) {
      alias(g.params[k], params_[k]);
      g.params[k].mutable_grad().reset();  // this step's gradient only
    }
    for (size_t k = 0; k < buffers_.size(); ++k) alias(g.buffers[k], buffers_[k]);
    const auto [begin, count] = row_group_range(batch_->tokens.size(0), groups(), g.index);
    const Batch rows = batch_rows(*batch_, begin, count);
    torch::AutoGradMode grad(true);
    BatchScore s = batch_score(g.replica->forward(rows.tokens), rows, normalizer_);
    s.loss.backward();
    s.loss = s.loss.detach();
    g.score = std::move(s);
  } catch (...) {
    g.error = std::current_exception();
  }
}

BatchScore RowGroups::forward_backward(const Batch& batch) {
  const int64_t B = batch.tokens.size(0);
  MIXLAB_CHECK(groups() <= B, "RowGroups: {} row groups need at least {} rows, the batch has {}", groups(), groups(),
               B);
  normalizer_ = batch.mask.sum().item<double>();
  MIXLAB_CHECK(normalizer_ > 0, "batch_score: the batch has no answer positions");
  batch_ = &batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next_group_ = 0;
    running_ = static_cast<int64_t>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  {
    ThisThreadIntraOpThreads one(1);
    run_groups();
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
  }
  batch_ = nullptr;
  for (auto& g : groups_)
    if (g->error) std::rethrow_exception(g->error);

  // The gradients, summed in group order into the first group's own tensor (no copy: a group
  // drops its gradient at the start of its next step, run_group).
  for (size_t k = 0; k < params_.size(); ++k) {
    torch::Tensor sum;
    for (auto& g : groups_) {
      const torch::Tensor& grad = g->params[k].grad();
      if (!grad.defined()) continue;
      if (!sum.defined())
        sum = grad;
      else
        sum.add_(grad);
    }
    if (sum.defined()) params_[k].mutable_grad() = sum;
  }

  BatchScore total;
  double loss = 0;
  for (auto& g : groups_) {
    const BatchScore& s = g->score;
    loss += s.loss.item<double>();
    total.correct_tokens += s.correct_tokens;
    total.answer_tokens += s.answer_tokens;
    total.correct_answers += s.correct_answers;
    total.answers += s.answers;
    total.correct_chains += s.correct_chains;
    total.chains += s.chains;
    total.batch_tokens += s.batch_tokens;
    if (total.hop_queries.size() < s.hop_queries.size()) {
      total.hop_queries.resize(s.hop_queries.size(), 0);
      total.hop_correct.resize(s.hop_queries.size(), 0);
    }
    for (size_t k = 0; k < s.hop_queries.size(); ++k) {
      total.hop_queries[k] += s.hop_queries[k];
      total.hop_correct[k] += s.hop_correct[k];
    }
  }
  total.loss = torch::tensor(loss, torch::kFloat64);
  return total;
}

}  // namespace mixlab
