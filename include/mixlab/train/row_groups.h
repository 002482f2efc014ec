// mixlab/train/row_groups.h — one training step's batch split by rows over threads.
//
// Why: at the compare and LM sizes a step is hundreds of small operations. Splitting each of
// them over the intra-op threads wakes a second thread per operation for a slice of a few
// microseconds, and the step scaled 1.46x on 2 threads (docs/BENCHMARKS.md, "threads").
// Splitting the batch instead gives each thread whole operations: group g runs forward and
// backward on its rows with one intra-op thread, on a replica of the model whose parameters
// and buffers share the model's storage (nothing is copied; each replica keeps its own
// gradients). The groups' gradients are then summed onto the model's in group order.
//
// Each group's loss is divided by the answer positions of the whole batch (the data-parallel
// rule, trainer.h), so the summed gradient is the one-group gradient up to float rounding. The
// result depends on the group count only: group g always takes rows row_group_range(B, G, g)
// on its own replica, and the sums run in group order, whichever thread ran which group and
// however many threads there are (min(groups, the constructing thread's intra-op threads)).
//
// Memory: each group keeps its own gradients (groups x the parameters' bytes, e.g. 8 groups of a
// GPT-2-vocabulary model at d 768: 1.2 GB), while the activations are the whole batch's, as
// without groups. Set row_groups=1 where that matters.
//
// A replica is built by the caller's factory (the same dims and mixers as the model) holding
// model_init_mutex and under a saved and restored global generator, so building one changes no
// later random draw. Before every step each replica is checked to still alias the model's
// tensors: loading a checkpoint replaces a parameter's storage (torch::load uses set_), and the
// replica then follows it.
#pragma once

#include <torch/torch.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "mixlab/model/model.h"
#include "mixlab/train/tasks.h"

namespace mixlab {

struct BatchScore;

/// Rows [begin, begin + count) of group `g` of `groups` over `rows` rows: the first rows % groups
/// groups hold one row more. Needs 1 <= groups <= rows.
std::pair<int64_t, int64_t> row_group_range(int64_t rows, int64_t groups, int64_t g);

class RowGroups {
 public:
  using ModelFactory = std::function<std::shared_ptr<DecoderModel>()>;

  /// `groups` >= 2 replicas of `model` made by `make_replica`, run by `threads` >= 1 threads
  /// (at most `groups`): the caller of forward_backward and threads - 1 workers, each with one
  /// intra-op thread.
  RowGroups(std::shared_ptr<DecoderModel> model, const ModelFactory& make_replica, int64_t groups, int64_t threads);
  ~RowGroups();
  RowGroups(const RowGroups&) = delete;
  RowGroups& operator=(const RowGroups&) = delete;

  int64_t groups() const { return static_cast<int64_t>(groups_.size()); }
  /// Threads that run groups: the caller of forward_backward and its workers.
  int64_t threads() const { return static_cast<int64_t>(workers_.size()) + 1; }

  /// Forward, score and backward of `batch` (at least groups() rows) in row groups; the summed
  /// gradients replace the model's parameters' gradients. Returns the whole batch's score; its
  /// `loss` is a float64 scalar without a graph (the sum of the groups' losses). A group's
  /// exception is rethrown here (the lowest group's).
  BatchScore forward_backward(const Batch& batch);

 private:
  struct Group;
  void run_group(Group& g);
  void run_groups();  // takes groups until none is left
  void work();        // a worker thread's loop

  std::shared_ptr<DecoderModel> model_;
  std::vector<torch::Tensor> params_, buffers_;  // the model's, in named order
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<std::thread> workers_;  // threads() - 1

  std::mutex mutex_;
  std::condition_variable start_, done_;
  uint64_t generation_ = 0;  // one per step: a thread works when it sees a new one
  int64_t next_group_ = 0;   // the next group a thread takes (under mutex_)
  int64_t running_ = 0;      // workers still working on this step
  bool stop_ = false;
  const Batch* batch_ = nullptr;
  double normalizer_ = 0;
};

}  // namespace mixlab
