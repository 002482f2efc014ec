// Cache-efficient sets S_i (seed 000 §4.2), by recursion and by closed form.
//
// CORRECTION (SPEC-NOTES §2, checked numerically): Definition 4.10 as printed rounds i − f(k)
// up within S_{i−1} ∪ {i}. With that set the recursion disagrees with the closed form of
// Prop. 4.12 from i = 3 on. Rounding up within S_{i−1} ∪ {i−1} — the token decoded just before,
// which every decoder holds — agrees with the closed form for every i we test (tests/pattern).
// mixlab implements the corrected recursion; the tests show it equals the closed form.
#include <algorithm>

#include "mixlab/core/error.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {

std::vector<int64_t> cache_lattice_steps(const Pattern& p, int64_t max_offset) {
  MIXLAB_CHECK(p.translation_invariant_family(),
               "cache_lattice_steps: pattern '{}' is not a translation-invariant family", p.spec());
  std::vector<int64_t> a;
  int64_t prev_f = 0;
  for (int64_t k = 0;; ++k) {
    int64_t f = pattern_offset(p, k);
    if (f < 0 || f >= max_offset) break;
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
  std::vector<int64_t> s;
  s.reserve(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    int64_t t = i - pattern_offset(p, static_cast<int64_t>(k));
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
  sets[0] = {1};  // S_1 = {1}
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
