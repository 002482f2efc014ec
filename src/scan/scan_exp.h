// Private: the exp of the selective scan's decay factors, shared by its forward
// (selective_scan.cpp) and the backward's recomputed chunks (selective_scan_kernels.inc), so that
// the two compute the same states. No LibTorch header: the per-ISA objects include it.
//
// In an unnamed namespace: each object (the baseline one and one per instruction set, with its
// own -m flags) keeps its own copy, inlined into its vector loops; an inline function of external
// linkage could be merged by the linker into one object's build.
#pragma once

#include <cmath>
#include <cstdint>

namespace mixlab::detail::selective_scan {
namespace {

// exp for the scan's decay factors, written so that the loops over n vectorise: std::exp has no
// vector form without -ffast-math, and one exp per (b,t,c,n) is the kernel's main cost. float:
// Cephes' expf scheme (x = k ln2 + r, |r| <= ln2/2, a degree-5 polynomial for e^r - 1 - r, then
// 2^k through the exponent bits): relative error about 2e-7 on [-87, 88]; inputs are clamped
// there, so exp of anything below -87 is 1.6e-38 instead of smaller (a decay that is 0 either
// way). double keeps std::exp (the gradient checks run in double).
inline float scan_exp(float x) {
  x = x < -87.0f ? -87.0f : x;  // conditional moves (std::min/max leave a branch in the loop)
  x = x > 88.0f ? 88.0f : x;
  float k = x * 1.44269504088896341f;
  k = (k + 12582912.0f) - 12582912.0f;  // round to nearest (|k| < 2^22), vectorisable
  const float r = x - k * 0.693359375f + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^k through the exponent bits (a memcpy would stop vectorisation); the shift is unsigned, so
  // it is defined for every k of a clamped input. A NaN input is not covered: C++ leaves the cast
  // of a NaN k to int undefined (x86 gives INT_MIN); er is NaN then and so is the result.
  const uint32_t biased = static_cast<uint32_t>(static_cast<int32_t>(k) + 127);
  return er * __builtin_bit_cast(float, biased << 23);
}
inline double scan_exp(double x) { return std::exp(x); }

}  // namespace
}  // namespace mixlab::detail::selective_scan
