// Cache-efficient sets S_i (seed 000 §4.2), by recursion and by closed form.
//
// CORRECTION (SPEC-NOTES §2, checked numerically): Definition 4.10 as printed rounds i − f(k)
// up within S_{i−1} ∪ {i}. With that set the recursion disagrees with the closed form of
// Prop. 4.12 from i = 3 on. Rounding up within S_{i−1} ∪ {i−1} — the token decoded just before,
// which every decoder holds — agrees with the closed form for every i we test (tests/pattern).
// mixlab implements the corrected recursion; the tests show it equals the closed form for every
// i >= 1, i = 1 included (S_1 is the empty read set of row 1, see cache_sets_recursive).
#include <algorithm>

#include "mixlab/core/error.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {

std::vector<int64_t> cache_lattice_steps(const Pattern& p, int64_t max_offset) {
  MIXLAB_CHECK(p.translation_invariant_family(),
               "cache_lattice_steps: pattern '{}' is not a translation-invariant family", p.spec());
  std::vector<int64_t> a;
  if (max_offset <= 1) return a;
  // One list instead of pattern_offset per k: O(K) for every kind (geom and unions have no O(1) f(k)).
  const auto offsets = p.offsets_upto(std::min(max_offset - 1, kPatternMaxT));
  int64_t prev_f = 0;
  for (size_t k = 0; k < offsets.size(); ++k) {
    const int64_t f = offsets[k];
    if (k == 0) {
      a.push_back(1);
    } else {
      int64_t ak = a.back();
      a.push_back(ak * ((f - prev_f + ak - 1) / ak));
    }
    prev_f = f;
  }
  return a;
}

std::vector<int64_t> cache_set_closed_form(const Pattern& p, int64_t i) {
  MIXLAB_CHECK(i >= 1, "cache_set_closed_form: i is 1-based and must be >= 1, got {}", i);
  auto a = cache_lattice_steps(p, i);  // all k with f(k) < i
  const auto f = p.offsets_upto(i - 1);
  MIXLAB_ASSERT(f.size() == a.size(), "lattice steps {} != offsets {}", a.size(), f.size());
  std::vector<int64_t> s;
  s.reserve(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    int64_t t = i - f[k];
    s.push_back(a[k] * ((t + a[k] - 1) / a[k]));
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

std::vector<std::vector<int64_t>> cache_sets_recursive(const Pattern& p, int64_t T) {
  MIXLAB_CHECK(p.translation_invariant_family(),
               "cache_sets_recursive: pattern '{}' is not a translation-invariant family", p.spec());
  MIXLAB_CHECK(T >= 1 && T <= kPatternMaxT, "cache_sets_recursive: T must be in [1, {}], got {}", kPatternMaxT, T);
  auto offsets = p.offsets_upto(T);
  std::vector<std::vector<int64_t>> sets(static_cast<size_t>(T));
  // S_1 = {}: row 1 has no past position to read (Pattern::row(0) is empty), as the closed form
  // gives. The seed's printed S_1 = {1} is the cache after step 1, S_1 ∪ {1}; candidates for
  // i = 2 are S_1 ∪ {1} = {1} either way, so every later set is unchanged.
  sets[0] = {};
  std::vector<int64_t> candidates;
  for (int64_t i = 2; i <= T; ++i) {
    // Candidates: S_{i-1} ∪ {i-1} (the correction), ascending.
    candidates = sets[i - 2];
    if (candidates.empty() || candidates.back() != i - 1) candidates.push_back(i - 1);
    auto& s = sets[i - 1];
    for (int64_t f : offsets) {
      if (f >= i) break;
      auto it = std::lower_bound(candidates.begin(), candidates.end(), i - f);
      MIXLAB_ASSERT(it != candidates.end(), "rounding {} found no cached position at i={}", i - f, i);
      s.push_back(*it);
    }
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  return sets;
}

}  // namespace mixlab
