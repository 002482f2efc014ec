// mixlab/dist/data_parallel.h — data-parallel collectives over LibTorch's c10d (Gloo backend).
//
//   DataParallel dp(dist_env_from_environment(), std::chrono::seconds(60));
//   dp.broadcast(params);          // rank 0's initial weights everywhere
//   ... loss.backward();
//   dp.all_reduce_sum(grads);      // bucketed, blocking: one all-reduce per bucket of <= bucket_bytes
//
// Training uses GradientReducer (gradient_reducer.h) instead: it starts each bucket's all-reduce
// with start_all_reduce_sum from autograd hooks and waits only after backward returns.
//
// The all-reduce. Up to kExchangeMaxRanks ranks, every rank sends its whole buffer to every other
// rank (Gloo point-to-point messages) and adds the buffers in rank order; above that, Gloo's ring
// all-reduce. On two local processes the exchange is 2–5x faster than the ring
// (bench/allreduce_latency.py).
//
// Rendezvous: rank 0 starts a c10d::TCPStore server on MASTER_ADDR:MASTER_PORT; every rank
// (rank 0 included) connects to it, then a c10d::ProcessGroupGloo is built over the store. Both
// all-reduce paths give the same bits on every rank, so ranks that start equal and apply the same
// optimiser step to the same reduced gradients stay equal without further synchronisation.
//
// Buckets. Gradients are packed, in parameter order, into flat buffers of at most bucket_bytes
// (default 25 MiB, as torch DDP) and each buffer is reduced in one call: a model of many small
// tensors costs a few collectives per step, not one per tensor.
//
// Joining. After the store connects, every rank publishes its LaunchFingerprint
// (launch_fingerprint.h) under mixlab/join/<rank> and waits for every rank's, so a rank that never
// comes is a DistributedError naming the missing ranks after the timeout, not a hang; then every
// rank compares them all and throws a LaunchMismatchError (exit code 2) naming the fields that
// differ and both values, before the process group and before any collective. Rank 0 serves the
// store, so it waits until every other rank has read the fingerprints before it goes on or
// refuses.
//
// Faults. Every collective runs under the timeout given at construction. A rank whose peer died
// gets a mixlab::DistributedError (an IoError: exit code 3) that names its own rank and the
// operation, within that timeout, never a hang; on the point-to-point exchange it also names the
// lost peer ("lost rank 1"). So that the survivors of a killed rank blame it and not each other:
// a failure to reach one peer never stops the messages to the others; a peer whose connection had
// already broken when a collective started is blamed before the ones waited for; and a rank that
// fails leaves a note in the store ("I lost rank R"; rank 0 serves the store 1.5 s longer), so a
// survivor that finds another survivor gone as well blames the rank without a note. Above
// kExchangeMaxRanks (Gloo's ring) the lost peer is not named. A MASTER_PORT that is already taken
// on rank 0 is reported as such.
//
// Not supported: GPUs/NCCL, uneven batches across ranks.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/dist/dist_env.h"
#include "mixlab/dist/launch_fingerprint.h"

namespace mixlab {

/// A collective failed: a peer exited, was killed, or could not be reached in time.
class DistributedError : public IoError {
 public:
  using IoError::IoError;
};

/// The ranks of one launch were started with different fingerprints (configs or binaries): a
/// user error, refused before training.
class LaunchMismatchError : public Error {
 public:
  using Error::Error;
};

/// A collective started by DataParallel::start_all_reduce_sum. wait() blocks until its result is
/// in the tensor it was given, and throws a DistributedError like the blocking calls.
class PendingCollective {
 public:
  bool pending() const { return static_cast<bool>(wait_); }
  void wait();

 private:
  friend class DataParallel;
  std::function<void()> wait_;
};

class DataParallel {
 public:
  static constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;
  /// Up to this many ranks start_all_reduce_sum exchanges whole buffers point to point (each rank
  /// sends (world - 1) x the bytes, one message latency); above it, Gloo's ring all-reduce.
  static constexpr int kExchangeMaxRanks = 4;

  /// Joins the launch described by `env` (rendezvous, fingerprint check, process group); blocks
  /// until every rank has joined or `timeout` passes. Throws LaunchMismatchError when a rank's
  /// `fingerprint` differs from this one's.
  DataParallel(const DistEnv& env, std::chrono::milliseconds timeout, int64_t bucket_bytes = kDefaultBucketBytes,
               const LaunchFingerprint& fingerprint = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int64_t rank() const;
  int64_t world_size() const;

  /// Overwrites `tensors` (CPU, contiguous or not) with rank 0's values.
  void broadcast(const std::vector<torch::Tensor>& tensors);
  /// Sums `tensors` over all ranks, in place, in buckets. Undefined tensors are skipped on every
  /// rank alike (a parameter without a gradient).
  void all_reduce_sum(const std::vector<torch::Tensor>& tensors);
  /// Sums a few scalars over all ranks (loss and accuracy counters for the progress line).
  std::vector<double> all_reduce_sum(const std::vector<double>& values);
  void barrier();
  /// Starts summing `flat` (CPU, contiguous) over all ranks, in place, and returns at once. Every
  /// rank must start the same collectives in the same order; `what` (a string literal) names it
  /// in errors. Every rank gets the same bits.
  PendingCollective start_all_reduce_sum(torch::Tensor flat, const char* what);

  /// Collectives issued by all_reduce_sum(tensors) so far (buckets, summed over calls).
  int64_t all_reduce_calls() const;
  /// Wall seconds spent in all_reduce_sum(tensors) so far (pack, reduce, unpack).
  double all_reduce_seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixlab
