// mixlab/dist/gradient_reducer.h — the data-parallel gradient all-reduce, overlapped with backward.
//
//   GradientReducer reducer(dp, model.parameters(), bucket_bytes);
//   optimizer.zero_grad();
//   reducer.begin();        // arms the hooks for this step
//   loss.backward();        // each bucket's all-reduce starts as soon as its gradients exist
//   reducer.finish();       // waits; every .grad now holds the sum over the ranks
//
// Why. Reducing the gradients after backward returns puts the whole collective on the critical
// path; on two local processes it took 23–29 % of a step (docs/log/benchmarks-2026-11.md). Torch DDP's answer,
// taken here: a hook on every parameter copies its gradient into a flat bucket buffer the moment
// autograd produces it, and the bucket's Gloo all-reduce starts when its last gradient arrives,
// while backward goes on computing the earlier layers. Only the last bucket's collective (and the
// wait for a slower rank) remains exposed.
//
// Buckets are filled in reverse parameter order (the order backward produces gradients), one dtype
// each, at most bucket_bytes each (a larger parameter is its own bucket). They are started in
// bucket order only, so every rank issues the same collectives in the same order even if hooks
// fired in another order.
//
// Parameters without a gradient. Each bucket carries one flag per parameter, set to 1 by the
// hook. A bucket whose parameters did not all receive a gradient is started by finish() with
// zeros in their place; after the reduction a parameter gets a .grad when some rank produced one
// or when it already had one (zero_grad keeps them), exactly as in one process with the whole
// batch, so the ranks' optimiser states stay equal.
//
// Assumes one backward per step into freshly zeroed gradients (the hook sees the gradient of this
// backward, not what .grad held before): no gradient accumulation across backward calls.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace mixlab {

class DataParallel;

/// Default bucket size (see docs/log/benchmarks-2026-11.md, "Data-parallel training": measured per size).
inline constexpr int64_t kDefaultGradientBucketBytes = int64_t{25} << 20;  // as torch DDP's

class GradientReducer {
 public:
  /// Hooks every parameter of `params` that requires a gradient. `dp` must outlive the reducer.
  GradientReducer(DataParallel& dp, const std::vector<torch::Tensor>& params, int64_t bucket_bytes);
  ~GradientReducer();  // removes the hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Arms the hooks for the next backward. Hooks that fire while not armed do nothing.
  void begin();
  /// After backward: starts the buckets not started yet, waits for all, writes the sums into the
  /// parameters' .grad and disarms. Throws DistributedError when a peer fails.
  void finish();

  int64_t bucket_count() const;
  /// Collectives issued so far (bucket_count per step).
  int64_t collectives() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixlab
