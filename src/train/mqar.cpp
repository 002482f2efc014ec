// MQAR and multi-hop rows; the format and its differences from zoology are in mqar.h.
#include "mixlab/train/mqar.h"

#include <algorithm>
#include <numeric>

#include "mixlab/core/error.h"
#include "mixlab/train/tasks.h"

namespace mixlab {

int64_t mqar_key_count(int64_t vocab) { return std::max<int64_t>(0, (vocab - kFirstContentToken) / 2); }

int64_t mqar_max_pairs(int64_t length) { return std::max<int64_t>(0, (length - 3) / 2); }

MqarLayout mqar_layout(int64_t length, int64_t pairs) {
  const int64_t free_tokens = length - 2 - 2 * pairs;
  MIXLAB_ASSERT(pairs >= 1 && free_tokens >= 1, "mqar_layout: {} pairs do not fit length {}", pairs, length);
  return {free_tokens / 2, free_tokens - free_tokens / 2};
}

void mqar_validate(const char* what, int64_t vocab, int64_t length, int64_t pairs, double hop_prob) {
  MIXLAB_CHECK(pairs >= 1, "{}: pairs must be >= 1, got {}", what, pairs);
  MIXLAB_CHECK(pairs <= mqar_max_pairs(length),
               "{}: {} pairs do not fit length {}: a row needs kBegin, 2 tokens per pair, kSep and at least one "
               "query, so pairs must be <= (length - 3) / 2 = {} (raise length or lower pairs)",
               what, pairs, length, mqar_max_pairs(length));
  MIXLAB_CHECK(pairs <= mqar_key_count(vocab),
               "{}: vocab {} is too small for {} pairs with distinct keys and values from disjoint sets: keys "
               "and values each get (vocab - 4) / 2 = {} tokens, so vocab must be >= {}",
               what, vocab, pairs, mqar_key_count(vocab), kFirstContentToken + 2 * pairs);
  MIXLAB_CHECK(hop_prob >= 0.0 && hop_prob <= 1.0, "{}: hop_prob must be in [0, 1], got {}", what, hop_prob);
}

namespace {

// n distinct tokens of [first, first + count): a partial Fisher–Yates.
std::vector<int64_t> draw_distinct(int64_t first, int64_t count, int64_t n, TaskRng& rng) {
  std::vector<int64_t> pool(count);
  std::iota(pool.begin(), pool.end(), first);
  for (int64_t i = 0; i < n; ++i) std::swap(pool[i], pool[i + rng.below(count - i)]);
  pool.resize(n);
  return pool;
}

}  // namespace

MqarRow mqar_row(int64_t vocab, int64_t length, int64_t pairs, double hop_prob, TaskRng& rng) {
  mqar_validate("mqar_row", vocab, length, pairs, hop_prob);
  const int64_t S = length, n = pairs, K = mqar_key_count(vocab);
  const MqarLayout lay = mqar_layout(S, n);

  const std::vector<int64_t> keys = draw_distinct(kFirstContentToken, K, n, rng);
  const std::vector<int64_t> values = draw_distinct(kFirstContentToken + K, vocab - kFirstContentToken - K, n, rng);
  // stored[i]: what pair i shows after its key (a value, or the key of an earlier pair: a link).
  std::vector<int64_t> stored = values, link(n, -1);
  if (hop_prob > 0) {
    for (int64_t i = 1; i < n; ++i) {
      if (rng.unit() < hop_prob) {
        link[i] = rng.below(i);
        stored[i] = keys[link[i]];
      }
    }
  }
  // Links point to earlier pairs, so one pass in context order resolves every chain.
  std::vector<int64_t> resolved(n), depth(n);
  for (int64_t i = 0; i < n; ++i) {
    resolved[i] = link[i] < 0 ? values[i] : resolved[link[i]];
    depth[i] = link[i] < 0 ? 0 : depth[link[i]] + 1;
  }

  MqarRow row;
  row.tokens.reserve(S);
  row.targets.assign(S, kTokenPad);
  row.scored.assign(S, 0);
  row.answer.assign(S, -1);
  row.hops.assign(S, -1);
  auto label = [&](int64_t pos, int64_t target) {
    row.targets[pos] = target;
    row.scored[pos] = 1;
  };

  // Context: n pair units (1) and g filler units (0) in random order.
  std::vector<uint8_t> units(n + lay.fillers, 0);
  std::fill(units.begin(), units.begin() + n, 1);
  rng.shuffle(units);
  row.tokens.push_back(kTokenBegin);
  int64_t next_pair = 0;
  for (uint8_t u : units) {
    if (!u) {
      row.tokens.push_back(kTokenNoise);
      continue;
    }
    row.tokens.push_back(keys[next_pair]);
    row.tokens.push_back(stored[next_pair]);
    if (link[next_pair] >= 0) label(static_cast<int64_t>(row.tokens.size()) - 1, resolved[next_pair]);
    ++next_pair;
  }
  row.tokens.push_back(kTokenSep);

  // Queries: uniform with repeats over the stored pairs.
  for (int64_t q = 0; q < lay.queries; ++q) {
    const int64_t i = rng.below(n);
    const int64_t pos = static_cast<int64_t>(row.tokens.size());
    row.tokens.push_back(keys[i]);
    label(pos, resolved[i]);
    row.answer[pos] = q;
    row.hops[pos] = depth[i];
  }
  MIXLAB_ASSERT(static_cast<int64_t>(row.tokens.size()) == S, "mqar_row: built {} tokens for length {}",
                row.tokens.size(), S);
  // Unscored positions predict the next input (never part of the loss; kept for inspection).
  for (int64_t t = 0; t + 1 < S; ++t)
    if (!row.scored[t]) row.targets[t] = row.tokens[t + 1];
  return row;
}

}  // namespace mixlab
