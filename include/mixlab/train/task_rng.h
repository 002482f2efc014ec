// mixlab/train/task_rng.h — the random source of the synthetic task generators.
//
// splitmix64 with integer-only sampling: the same seed gives the same rows on every platform and
// standard library (std:: distributions do not promise that). Shared by tasks.cpp and the MQAR
// generator (mqar.h) so that every task draws from one documented stream.
//
// Not a cryptographic generator; not thread-safe (one instance per row).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace mixlab {

struct TaskRng {
  uint64_t s;
  explicit TaskRng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (rejection); n >= 1.
  int64_t below(int64_t n) {
    const uint64_t un = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do {
      r = next();
    } while (r >= limit);
    return static_cast<int64_t>(r % un);
  }
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }               // [lo, hi]
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher–Yates
    for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[below(i + 1)]);
  }
};

}  // namespace mixlab
