// mixlab/scan/scan.h — the prefix-scan engine of Prefix-Scannable Models (seed 004 §3.3, App. E).
//
// Two evaluations of the same parenthesisation of x_0 Agg x_1 Agg ... Agg x_{t-1}:
//   * blelloch_scan (Alg. 1, training): up-sweep / down-sweep over r elements, parallel within
//     each tree level (at::parallel_for); returns the r+1 exclusive prefixes P_0 = e, ..., P_r
//     (P_r aggregates everything, e.g. the final state).
//   * BinaryCounterScan (Alg. 2, inference): insert one element at a time; keeps one root per
//     block size 2^k and emits the prefix after each insertion.
// Both use the SAME tree, so for any Agg — associative or not — the counter's prefix after t
// insertions is bitwise the static scan's P_t when Agg is deterministic (Thm. 3.5); tested with a
// non-associative tanh network.
//
// The tree for any r (not only powers of two): the perfect binary tree over 2^L >= r+1 leaf
// slots, leaf i holding x_i. Only COMPLETE nodes (aligned blocks [j 2^l, (j+1) 2^l) lying inside
// [0, r)) are aggregated; the prefix of slot i (0 <= i <= r) is the fold, from the most to the
// least significant set bit of i, of the complete blocks of i's binary decomposition:
//   P_i = Agg(...Agg(Agg(e, T[block of bit K]), T[block of bit K-1])..., T[block of lowest bit]).
// For r a power of two this is exactly Alg. 1. Agg(e, .) is evaluated, never skipped, because a
// non-associative Agg need not treat e as an identity.
//
// Agg convention: agg(left, right) with `left` the EARLIER block (x_0 side). For the affine
// aggregator of Lemma 3.4, (E2,f2) ⊕ (E1,f1) with 2 the later element, agg(left=1, right=2).
//
// Cost: static scan <= 2r Agg calls, depth 2 ceil(log2(r+1)); counter: over t insertions
// (t - popcount(t)) merges + t folds <= 2t Agg calls (amortised O(1): the counter caches the
// MSB->LSB partial fold next to each root, so an insertion refolds only its new root). Storage:
// popcount(t) <= ceil(log2(t+1)) roots (Cor. 3.6, stated there per t+1 chunks; with t = the
// number of insertions the bound holds for every t >= 0) plus one cached fold per root.
//
// Not supported: in-place Agg (agg must return a new value and not modify its arguments; values
// are shared between tree nodes). Threads: Agg is called concurrently from at::parallel_for
// workers when options.parallel; the caller's grad mode is propagated to the workers.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixlab/core/error.h"

namespace mixlab {

struct ScanOptions {
  bool parallel = true;  // at::parallel_for over the nodes of one tree level
};

/// Counts of one static scan, for complexity tests.
struct ScanStats {
  int64_t agg_calls = 0;
  int64_t levels = 0;  // tree height L (2^L >= r+1)
};

namespace detail {
/// Smallest L with 2^L >= n (n >= 1).
inline int64_t scan_ceil_log2(int64_t n) {
  int64_t levels = 0;
  while ((int64_t{1} << levels) < n) ++levels;
  return levels;
}
}  // namespace detail

/// Exclusive prefixes P_0..P_r of x_0..x_{r-1} under the Blelloch tree (see file comment).
/// Returns r+1 values; P_0 is `identity` itself.
template <class State, class Agg>
std::vector<State> blelloch_scan(const std::vector<State>& x, const Agg& agg, const State& identity,
                                 ScanOptions options = {}, ScanStats* stats = nullptr) {
  const int64_t r = static_cast<int64_t>(x.size());
  const int64_t levels = detail::scan_ceil_log2(r + 1);
  std::atomic<int64_t> calls{0};
  const bool grad_enabled = at::GradMode::is_enabled();
  // Runs body(j) for j in [0, n), in parallel when allowed. Grad mode is thread-local in
  // LibTorch and at::parallel_for does not propagate it, so it is set in each worker.
  auto for_each = [&](int64_t n, const auto& body) {
    if (!options.parallel || n < 2) {
      for (int64_t j = 0; j < n; ++j) body(j);
      return;
    }
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      at::AutoGradMode mode(grad_enabled);
      for (int64_t j = begin; j < end; ++j) body(j);
    });
  };

  // Up-sweep: tree[l][j] aggregates the complete block [j 2^l, (j+1) 2^l) ⊂ [0, r).
  std::vector<std::vector<State>> tree(static_cast<size_t>(levels + 1));
  tree[0] = x;
  for (int64_t l = 1; l <= levels; ++l) {
    const int64_t n = r >> l;  // complete blocks at level l
    auto& below = tree[static_cast<size_t>(l - 1)];
    std::vector<std::optional<State>> level(static_cast<size_t>(n));
    for_each(n, [&](int64_t j) {
      level[static_cast<size_t>(j)].emplace(
          agg(below[static_cast<size_t>(2 * j)], below[static_cast<size_t>(2 * j + 1)]));
      calls.fetch_add(1, std::memory_order_relaxed);
    });
    auto& out = tree[static_cast<size_t>(l)];
    out.reserve(static_cast<size_t>(n));
    for (auto& v : level) out.push_back(std::move(*v));
  }

  // Down-sweep: prefix[j] at level l is the exclusive prefix at slot j 2^l, for slots <= r.
  std::vector<State> prefix{identity};
  for (int64_t l = levels; l >= 1; --l) {
    const int64_t n = (r >> (l - 1)) + 1;  // slots j 2^(l-1) <= r at level l-1
    std::vector<std::optional<State>> next(static_cast<size_t>(n));
    const auto& left_blocks = tree[static_cast<size_t>(l - 1)];
    for_each(n, [&](int64_t j) {
      const State& parent = prefix[static_cast<size_t>(j / 2)];
      if (j % 2 == 0) {
        next[static_cast<size_t>(j)].emplace(parent);  // left child: same prefix (a copy)
      } else {
        // right child: parent prefix, then the complete left sibling [(j-1) 2^(l-1), j 2^(l-1)).
        next[static_cast<size_t>(j)].emplace(agg(parent, left_blocks[static_cast<size_t>(j - 1)]));
        calls.fetch_add(1, std::memory_order_relaxed);
      }
    });
    prefix.clear();
    prefix.reserve(static_cast<size_t>(n));
    for (auto& v : next) prefix.push_back(std::move(*v));
  }
  MIXLAB_ASSERT(static_cast<int64_t>(prefix.size()) == r + 1, "blelloch_scan: {} prefixes for r = {}", prefix.size(),
                r);
  if (stats) {
    stats->agg_calls = calls.load();
    stats->levels = levels;
  }
  return prefix;
}

/// Online binary counter (Alg. 2): insert x_t, read the prefix of everything inserted so far
/// (equal to blelloch_scan(...)[t+1]).
template <class State, class Agg>
class BinaryCounterScan {
 public:
  /// One occupied block: level k (block size 2^k), its root, and the MSB->LSB fold of the
  /// roots at levels >= k (the emitted prefix when k is the lowest occupied level).
  struct Slot {
    int64_t level = 0;
    State root;
    State fold;
  };

  BinaryCounterScan(Agg agg, State identity) : agg_(std::move(agg)), identity_(std::move(identity)) {}

  /// Inserts the next element and returns the prefix x_0 .. x_t under the Blelloch tree.
  const State& insert(State x) {
    State carry = std::move(x);
    int64_t level = 0;
    // Slots are kept from most to least significant; the carry merges with the trailing ones.
    while (!slots_.empty() && slots_.back().level == level) {
      carry = agg_(slots_.back().root, carry);  // older block on the left
      ++agg_calls_;
      slots_.pop_back();
      ++level;
    }
    const State& above = slots_.empty() ? identity_ : slots_.back().fold;
    State fold = agg_(above, carry);
    ++agg_calls_;
    slots_.push_back(Slot{level, std::move(carry), std::move(fold)});
    ++count_;
    return slots_.back().fold;
  }

  /// Prefix of everything inserted so far (`identity` when empty).
  const State& prefix() const { return slots_.empty() ? identity_ : slots_.back().fold; }
  /// Number of elements inserted.
  int64_t count() const { return count_; }
  /// Number of roots held (popcount(count())).
  int64_t roots() const { return static_cast<int64_t>(slots_.size()); }
  /// Agg calls so far (merges + folds).
  int64_t agg_calls() const { return agg_calls_; }
  /// Occupied slots, most significant first.
  const std::vector<Slot>& slots() const { return slots_; }
  const State& identity() const { return identity_; }

  /// Restores a counter from saved slots (see scan_counter_save/load). Checks that the levels
  /// are the binary digits of `count`, most significant first.
  void restore(int64_t count, std::vector<Slot> slots, int64_t agg_calls = 0) {
    MIXLAB_CHECK(count >= 0, "BinaryCounterScan::restore: count must be >= 0, got {}", count);
    std::vector<int64_t> expected;
    for (int64_t k = 62; k >= 0; --k)
      if ((count >> k) & 1) expected.push_back(k);
    MIXLAB_CHECK(expected.size() == slots.size(), "BinaryCounterScan::restore: count {} needs {} roots, got {}", count,
                 expected.size(), slots.size());
    for (size_t i = 0; i < slots.size(); ++i)
      MIXLAB_CHECK(slots[i].level == expected[i],
                   "BinaryCounterScan::restore: root {} has level {}, expected {} for count {}", i, slots[i].level,
                   expected[i], count);
    count_ = count;
    slots_ = std::move(slots);
    agg_calls_ = agg_calls;
  }

 private:
  Agg agg_;
  State identity_;
  std::vector<Slot> slots_;
  int64_t count_ = 0;
  int64_t agg_calls_ = 0;
};

/// Saved form of a tensor-valued counter: count, levels, roots and folds, written with
/// torch::serialize (keys "count", "levels", "root_<i>", "fold_<i>").
void scan_counter_save_tensors(const std::string& path, int64_t count, const std::vector<int64_t>& levels,
                               const std::vector<at::Tensor>& roots, const std::vector<at::Tensor>& folds);
struct SavedCounterTensors {
  int64_t count = 0;
  std::vector<int64_t> levels;
  std::vector<at::Tensor> roots;
  std::vector<at::Tensor> folds;
};
SavedCounterTensors scan_counter_load_tensors(const std::string& path);

/// Saves a counter whose State is at::Tensor.
template <class Agg>
void scan_counter_save(const BinaryCounterScan<at::Tensor, Agg>& counter, const std::string& path) {
  std::vector<int64_t> levels;
  std::vector<at::Tensor> roots, folds;
  for (const auto& s : counter.slots()) {
    levels.push_back(s.level);
    roots.push_back(s.root);
    folds.push_back(s.fold);
  }
  scan_counter_save_tensors(path, counter.count(), levels, roots, folds);
}

/// Restores a counter whose State is at::Tensor (its Agg and identity come from `counter`).
template <class Agg>
void scan_counter_load(BinaryCounterScan<at::Tensor, Agg>& counter, const std::string& path) {
  SavedCounterTensors saved = scan_counter_load_tensors(path);
  std::vector<typename BinaryCounterScan<at::Tensor, Agg>::Slot> slots;
  for (size_t i = 0; i < saved.levels.size(); ++i) slots.push_back({saved.levels[i], saved.roots[i], saved.folds[i]});
  counter.restore(saved.count, std::move(slots));
}

}  // namespace mixlab
