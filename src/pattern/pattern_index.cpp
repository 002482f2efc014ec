// The per-row index a kernel reads: row i → its past positions in fixed-width slots.
// Computed once per (spec, T) and kept in a small process-wide cache.
#include <map>
#include <mutex>

#include "mixlab/core/error.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {
namespace {

// Refuse indices larger than this many slots (8 bytes each): 2^28 slots = 2 GiB.
constexpr int64_t kMaxIndexSlots = int64_t{1} << 28;
// Keep at most this many indices alive; the oldest is dropped first.
constexpr size_t kMaxCachedIndices = 64;

std::shared_ptr<PatternIndex> build_index(const Pattern& p, int64_t T) {
  auto idx = std::make_shared<PatternIndex>();
  idx->T = T;
  idx->W = p.max_width(T);
  MIXLAB_CHECK(idx->W == 0 || T <= kMaxIndexSlots / idx->W,
               "pattern_index: pattern '{}' at T={} needs T*W = {}*{} slots, above the limit {}; use a sparser "
               "pattern or a shorter T",
               p.spec(), T, T, idx->W, kMaxIndexSlots);
  idx->past.assign(static_cast<size_t>(T * idx->W), -1);
  idx->count.assign(static_cast<size_t>(T), 0);
  for (int64_t i = 0; i < T; ++i) {
    auto r = p.row(i);
    MIXLAB_ASSERT(static_cast<int64_t>(r.size()) <= idx->W, "row {} wider than W={}", i, idx->W);
    idx->count[i] = static_cast<int64_t>(r.size());
    std::copy(r.begin(), r.end(), idx->past.begin() + i * idx->W);
  }
  return idx;
}

}  // namespace

int64_t PatternIndex::nnz() const {
  int64_t s = 0;
  for (auto c : count) s += c;
  return s;
}

std::shared_ptr<const PatternIndex> pattern_index(const Pattern& p, int64_t T) {
  MIXLAB_CHECK(T > 0, "pattern_index: T must be > 0, got {}", T);
  MIXLAB_CHECK(T <= kPatternMaxT, "pattern_index: T = {} exceeds the limit {}", T, kPatternMaxT);
  static std::mutex mutex;
  static std::map<std::pair<std::string, int64_t>, std::shared_ptr<PatternIndex>> cache;
  static std::vector<std::pair<std::string, int64_t>> order;
  auto key = std::make_pair(p.spec(), T);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto idx = build_index(p, T);  // built outside the lock: may be slow for long T
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.emplace(key, idx);
  if (inserted) {
    order.push_back(key);
    if (order.size() > kMaxCachedIndices) {
      cache.erase(order.front());
      order.erase(order.begin());
    }
  }
  return it->second;
}

}  // namespace mixlab
