// mixlab/core/native_vectors.h — the vector type of the instruction set a per-ISA kernel is
// compiled for, its loads and stores, and the lane sums (a transposing fold tree), shared by the
// kernels written once as `.inc` files and compiled per set (mixlab/core/isa_dispatch.h).
//
// Include it only from those files (or code compiled like them): everything here computes in
// MIXLAB_ISA_VEC_BYTES, the register width of the -m flags the including file is compiled with.
// The inline namespace is named after that width, so that the AVX2 and AVX-512 objects' copies of
// these inline templates have their own mangled names and the linker cannot hand one set's code
// to a caller of another (the generic objects and plain files share the baseline's 16 bytes and
// flags). No LibTorch header: the per-ISA objects are built without the precompiled one.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "mixlab/core/isa_dispatch.h"

#define MIXLAB_NATIVE_VECTORS_CAT2(a, b) a##b
#define MIXLAB_NATIVE_VECTORS_CAT(a, b) MIXLAB_NATIVE_VECTORS_CAT2(a, b)
// bytes16, bytes32 or bytes64: the inline namespace of this file and of the kernels' own row helpers.
#define MIXLAB_NATIVE_NS MIXLAB_NATIVE_VECTORS_CAT(bytes, MIXLAB_ISA_VEC_BYTES)

namespace mixlab::native {
inline namespace MIXLAB_NATIVE_NS {

template <typename E>
struct VecOf {
  typedef E type __attribute__((vector_size(MIXLAB_ISA_VEC_BYTES)));
};

// Lanes of one native vector (vector_lanes<E>(), the layout's, is a multiple of it).
template <typename E>
constexpr int64_t native_lanes() {
  return MIXLAB_ISA_VEC_BYTES / static_cast<int64_t>(sizeof(E));
}
static_assert(kVectorBytes % MIXLAB_ISA_VEC_BYTES == 0, "the layout's vector is whole native vectors");

// A vector of Bytes bytes of E (16 to the set's width): the narrower register a kernel uses along
// a row of n elements that is not a whole number of native vectors (a head dim of 8 floats under
// AVX-512, MAD's model: d_model 128 over 16 heads). GCC lowers it to the set's ymm or xmm.
template <typename E, int Bytes>
struct VecOfBytes {
  static_assert(Bytes >= 16 && Bytes <= MIXLAB_ISA_VEC_BYTES, "16 bytes to the set's width");
  typedef E type __attribute__((vector_size(Bytes)));
};

// The vector type a tag stands for. Kernels pick a vector at run time by calling a generic lambda
// with a null pointer to it (with_row_vector below, the affine kernels' narrower_vectors): the
// pointer keeps the call's ABI the same in every per-set object, and this names its type.
template <typename Tag>
using VecOfTag = std::remove_pointer_t<Tag>;

// The fewest lanes of any row vector (16 bytes): rows of a multiple of it run in vectors on every set.
template <typename E>
constexpr int64_t row_vector_lanes() {
  return 16 / static_cast<int64_t>(sizeof(E));
}

// Calls f(static_cast<RV*>(nullptr)) with RV the widest vector of 16 bytes to the set's width
// whose lanes divide n (a row's length); false, without calling f, when n is not a positive
// multiple of row_vector_lanes<E>(). The tag is a pointer: a vector argument wider than 16 bytes
// would change the call's ABI between the per-set objects.
template <typename E, typename F>
inline bool with_row_vector(int64_t n, F&& f) {
  if (n <= 0) return false;  // an empty row has no vector (a caller would run a whole one)
  const int64_t bytes = n * static_cast<int64_t>(sizeof(E));
  if (bytes % MIXLAB_ISA_VEC_BYTES == 0) {
    f(static_cast<typename VecOf<E>::type*>(nullptr));
    return true;
  }
  if constexpr (MIXLAB_ISA_VEC_BYTES >= 32) {
    if (bytes % (MIXLAB_ISA_VEC_BYTES / 2) == 0) {
      f(static_cast<typename VecOfBytes<E, MIXLAB_ISA_VEC_BYTES / 2>::type*>(nullptr));
      return true;
    }
  }
  if constexpr (MIXLAB_ISA_VEC_BYTES >= 64) {
    if (bytes % 16 == 0) {
      f(static_cast<typename VecOfBytes<E, 16>::type*>(nullptr));
      return true;
    }
  }
  return false;
}

template <typename V, typename E>
inline V load(const E* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename E>
inline void store(E* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}
template <typename V, typename E>
inline V splat(E x) {
  return V{} + x;
}

// Lanes of a vector type.
template <typename V>
constexpr int lane_count() {
  return static_cast<int>(sizeof(V) / sizeof(std::declval<V>()[0]));
}

// The lane sums of N = lanes vectors at once, as one vector (lane s: the sum of acc[s]'s lanes):
// a transposing tree. One fold takes two vectors whose lanes hold n slots of w partial sums each
// (a's slots first) to one vector of 2n slots of w/2, adding each slot's two halves; log2(N)
// levels of such folds leave one lane per slot, in order. N − 1 folds of two shuffles and an add,
// where one tree per slot costs log2(N) shuffles and adds each and a scalar store: the backward's
// dα and dβ dots spent most of their time in those (issue 38).
template <int N, int W, int l, bool kHigh>
constexpr int fold_lane() {
  constexpr int half = W / 2, slots_a = N / W, m = l / half, k = l % half;
  return (m < slots_a ? m * W + k : N + (m - slots_a) * W + k) + (kHigh ? half : 0);
}

template <typename V, int N, int W, int... ls>
inline V fold(const V& a, const V& b, std::integer_sequence<int, ls...>) {
  return __builtin_shufflevector(a, b, fold_lane<N, W, ls, false>()...) +
         __builtin_shufflevector(a, b, fold_lane<N, W, ls, true>()...);
}

// acc[0, count) at width W (N / W slots each) folded in place, level by level, to acc[0] (count
// N / W slots at width W / count).
template <typename V, int N, int W, int count>
inline void fold_levels(V* acc) {
  if constexpr (count >= 2) {
#pragma GCC unroll 16
    for (int k = 0; k < count / 2; ++k)
      acc[k] = fold<V, N, W>(acc[2 * k], acc[2 * k + 1], std::make_integer_sequence<int, N>{});
    fold_levels<V, N, W / 2, count / 2>(acc);
  }
}

template <typename V, int N>
inline V lane_sums(V* acc) {
  fold_levels<V, N, N, N>(acc);
  return acc[0];
}

// a and b side by side: one vector of twice their lanes (a's first).
template <typename RV, int... ls>
inline auto concatenated(const RV& a, const RV& b, std::integer_sequence<int, ls...>) {
  return __builtin_shufflevector(a, b, ls...);
}

// lane_sums for N = native lanes row vectors RV of fewer lanes (with_row_vector's narrower
// registers: each slot's dot summed along a head dim of 8 floats in a ymm under AVX-512). Placed
// side by side, N / LR of them fill one native vector that holds N / LR slots of LR partial sums:
// the state lane_sums reaches after log2(N / LR) levels, so the folds go on from there. Lane s of
// the result: the sum of acc[s]'s lanes.
template <typename V, typename RV>
inline V row_lane_sums(RV* acc) {
  constexpr int N = lane_count<V>(), LR = lane_count<RV>();
  static_assert(N % LR == 0 && sizeof(V) % sizeof(RV) == 0, "RV: a vector of the native one's lanes or fewer");
  if constexpr (LR == N) {
    return lane_sums<V, N>(acc);
  } else {
    constexpr int pieces = N / LR;
    static_assert(pieces == 2 || pieces == 4, "row vectors of a half or a quarter of the native one");
    V w[LR];
    for (int k = 0; k < LR; ++k) {
      const RV* a = acc + k * pieces;
      if constexpr (pieces == 2) {
        w[k] = (V)concatenated(a[0], a[1], std::make_integer_sequence<int, 2 * LR>{});
      } else {
        const auto lo = concatenated(a[0], a[1], std::make_integer_sequence<int, 2 * LR>{});
        const auto hi = concatenated(a[2], a[3], std::make_integer_sequence<int, 2 * LR>{});
        w[k] = (V)concatenated(lo, hi, std::make_integer_sequence<int, 4 * LR>{});
      }
    }
    fold_levels<V, N, LR, LR>(w);
    return w[0];
  }
}

// out[0, m) += the first m lanes of v.
template <typename V, typename E>
inline void add_lanes(E* out, const V& v, int m) {
  E lanes[sizeof(V) / sizeof(E)];
  std::memcpy(lanes, &v, sizeof(V));
  for (int q = 0; q < m; ++q) out[q] += lanes[q];
}

// The sum of v's lanes: the same folds with v as both halves, lane 0 left with the total.
template <typename V, int N, int W = N>
inline V self_folded(const V& v) {
  if constexpr (W >= 2)
    return self_folded<V, N, W / 2>(fold<V, N, W>(v, v, std::make_integer_sequence<int, N>{}));
  else
    return v;
}

template <typename V, typename E>
inline E lane_total(const V& v) {
  return self_folded<V, static_cast<int>(sizeof(V) / sizeof(E))>(v)[0];
}

// The lane sums of R vectors (R a power of two, at most N = lanes) in lanes [0, R) of one vector:
// lane_sums' folds until one vector holds the R slots (at width N / R), then that vector folded
// with itself until each slot is one lane. Each sum adds its lanes in lane_total's order (halves
// first), so lane r equals lane_total(acc[r]) bit for bit; for R = 4 of 16 lanes it costs 5 folds
// of three instructions, where 4 trees cost 16 shuffles and 16 adds.
template <typename V, int R>
inline V few_lane_sums(V* acc) {
  constexpr int N = lane_count<V>();
  static_assert(R >= 1 && R <= N && (R & (R - 1)) == 0, "R: a power of two, at most the lanes");
  fold_levels<V, N, N, R>(acc);
  return self_folded<V, N, N / R>(acc[0]);
}

// One stage of an in-register transpose: rows i and i + h (bit h of i clear) swap the lanes whose
// index has bit h set in one row and clear in the other. After the stages h = N/2, ..., 1 every
// element (r, c) has had each differing bit of r and c exchanged: it sits at (c, r).
template <typename V, int h, int... ls>
inline void swap_blocks(V& a, V& b, std::integer_sequence<int, ls...>) {
  constexpr int N = sizeof...(ls);
  const V lo = __builtin_shufflevector(a, b, ((ls & h) ? N + (ls ^ h) : ls)...);
  const V hi = __builtin_shufflevector(a, b, ((ls & h) ? N + ls : (ls ^ h))...);
  a = lo;
  b = hi;
}

template <typename V, int h>
inline void transpose_stages(V* m) {
  if constexpr (h >= 1) {
    constexpr int N = lane_count<V>();
#pragma GCC unroll 16
    for (int i = 0; i < N; ++i)
      if (!(i & h)) swap_blocks<V, h>(m[i], m[i + h], std::make_integer_sequence<int, N>{});
    transpose_stages<V, h / 2>(m);
  }
}

// m[0, N) (N = lanes; row r = m[r]) transposed in place, in registers: N log2(N) two-vector
// shuffles (64 for 16 lanes), where element by element a 16 x 16 block is 256 loads and stores.
template <typename V>
inline void transpose_square(V* m) {
  transpose_stages<V, lane_count<V>() / 2>(m);
}

// Rows [0, j) of x transposed into bt (transpose_padded's layout) in blocks of L x L through
// transpose_square, columns past the last whole block element by element; returns j, the rows
// of whole blocks (rows rounded down to L).
template <typename V, typename E>
int64_t transpose_square_blocks(const E* x, int64_t x_row, int64_t rows, int64_t rows_p, int64_t cols, E* bt) {
  constexpr int64_t L = lane_count<V>();
  int64_t j0 = 0;
  for (; j0 + L <= rows; j0 += L) {
    int64_t d0 = 0;
    for (; d0 + L <= cols; d0 += L) {
      V m[L];
#pragma GCC unroll 16
      for (int64_t l = 0; l < L; ++l) m[l] = load<V>(x + (j0 + l) * x_row + d0);
      transpose_square(m);
#pragma GCC unroll 16
      for (int64_t l = 0; l < L; ++l) store(bt + (d0 + l) * rows_p + j0, m[l]);
    }
    for (; d0 < cols; ++d0)
      for (int64_t j = j0; j < j0 + L; ++j) bt[d0 * rows_p + j] = x[j * x_row + d0];
  }
  return j0;
}

// bt (cols x rows_p, rows_p apart) = rows [0, rows) of x (x_row apart, cols columns) transposed,
// zero in columns [rows, rows_p). Whole blocks of lanes x lanes go through transpose_square; the
// attention kernels transpose each head's keys and values with it once per call (element by
// element it was a tenth of local:64's forward+backward at T 4096). Columns narrower than one
// native vector go in blocks of the widest vector whose lanes divide them (with_row_vector): a
// head dim of 8 floats under AVX-512 in 8 x 8 blocks of ymm rows, where 16 x 16 blocks never fit
// and every element went one at a time (5 % of BRL's training step at MAD's model, whose groups
// are 8 keys of 8 dims).
template <typename E>
void transpose_padded(const E* x, int64_t x_row, int64_t rows, int64_t rows_p, int64_t cols, E* bt) {
  int64_t j0 = 0;
  // Narrower blocks only where no native block fits (cols 68 keeps its 16 x 16 blocks and a
  // 4-column tail rather than 4 x 4 blocks throughout).
  const bool narrow = cols < native_lanes<E>() && with_row_vector<E>(cols, [&](auto* rv) {
                        j0 = transpose_square_blocks<VecOfTag<decltype(rv)>>(x, x_row, rows, rows_p, cols, bt);
                      });
  if (!narrow) j0 = transpose_square_blocks<typename VecOf<E>::type>(x, x_row, rows, rows_p, cols, bt);
  for (int64_t j = j0; j < rows; ++j)
    for (int64_t d = 0; d < cols; ++d) bt[d * rows_p + j] = x[j * x_row + d];
  for (int64_t d = 0; d < cols; ++d)
    for (int64_t j = rows; j < rows_p; ++j) bt[d * rows_p + j] = E(0);
}

// Below this many slots in a group, a fold tree per slot (2 log2 N shuffles and adds) costs less
// than lane_sums' N − 1 folds of three.
template <int N>
constexpr int per_slot_sums_below() {
  int log2n = 0;
  while ((1 << log2n) < N) ++log2n;
  return log2n == 0 ? 2 : (3 * (N - 1)) / (2 * log2n) + 1;
}

// out[0, m) += the sums of acc[0, m)'s lanes, by whichever way costs less for m.
template <typename V, typename E, int N>
inline void add_sums(E* out, V* acc, int m) {
  if (m < per_slot_sums_below<N>()) {
    for (int q = 0; q < m; ++q) out[q] += lane_total<V, E>(acc[q]);
  } else {
    add_lanes(out, lane_sums<V, N>(acc), m);
  }
}

// The first m (0 <= m <= lanes) elements of p in the low lanes, `fill` in the others; reads only
// those m elements (a row's tail at the end of a buffer). AVX-512 and AVX2 load under a lane mask;
// the generic build copies the elements.
template <typename V, typename E>
inline V load_partial(const E* p, int64_t m, E fill) {
  constexpr int n = static_cast<int>(sizeof(V) / sizeof(E));
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    if constexpr (sizeof(E) == 4) {
      return (V)_mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << m) - 1u), p);
    } else {
      return (V)_mm512_mask_loadu_pd(_mm512_set1_pd(fill), static_cast<__mmask8>((1u << m) - 1u), p);
    }
  }
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(V) == 32) {
    typedef int64_t VI __attribute__((vector_size(32)));
    typedef int32_t VI32 __attribute__((vector_size(32)));
    if constexpr (sizeof(E) == 4) {
      const VI32 lanes = {0, 1, 2, 3, 4, 5, 6, 7};
      const VI32 mask = lanes < static_cast<int32_t>(m);
      const V v = (V)_mm256_maskload_ps(p, (__m256i)mask);
      return mask ? v : splat<V>(fill);
    } else {
      const VI lanes = {0, 1, 2, 3};
      const VI mask = lanes < m;
      const V v = (V)_mm256_maskload_pd(p, (__m256i)mask);
      return mask ? v : splat<V>(fill);
    }
  }
#endif
  V v = splat<V>(fill);
  for (int l = 0; l < n; ++l)
    if (l < m) v[l] = p[l];
  return v;
}

// The first m (0 <= m <= lanes) lanes of v to p; writes only those.
template <typename V, typename E>
inline void store_partial(E* p, const V& v, int64_t m) {
  constexpr int n = static_cast<int>(sizeof(V) / sizeof(E));
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    if constexpr (sizeof(E) == 4) {
      _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << m) - 1u), (__m512)v);
    } else {
      _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << m) - 1u), (__m512d)v);
    }
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(V) == 32) {
    if constexpr (sizeof(E) == 4) {
      typedef int32_t VI32 __attribute__((vector_size(32)));
      const VI32 lanes = {0, 1, 2, 3, 4, 5, 6, 7};
      _mm256_maskstore_ps(p, (__m256i)(lanes < static_cast<int32_t>(m)), (__m256)v);
    } else {
      typedef int64_t VI __attribute__((vector_size(32)));
      const VI lanes = {0, 1, 2, 3};
      _mm256_maskstore_pd(p, (__m256i)(lanes < m), (__m256d)v);
    }
    return;
  }
#endif
  for (int l = 0; l < n; ++l)
    if (l < m) p[l] = v[l];
}

// Lane l of v swapped with lane l ^ half.
template <typename V, int half, int... ls>
inline V swap_lanes(const V& v, std::integer_sequence<int, ls...>) {
  return __builtin_shufflevector(v, v, (ls ^ half)...);
}

template <bool kMax, typename V, int half>
inline V butterfly(V v) {
  if constexpr (half >= 1) {
    const V w = swap_lanes<V, half>(v, std::make_integer_sequence<int, lane_count<V>()>{});
    return butterfly<kMax, V, half / 2>(kMax ? (v > w ? v : w) : v + w);
  } else {
    return v;
  }
}

// Every lane the maximum (kMax) or the sum of v's lanes, by a butterfly of log2(lanes) swaps:
// a row's softmax keeps its maximum and sum as vectors, with no scalar round trip.
template <bool kMax, typename V>
inline V lanes_reduced(const V& v) {
  return butterfly<kMax, V, lane_count<V>() / 2>(v);
}

template <typename V, typename E>
inline E hsum(const V& x) {
  E s = 0;
  for (size_t l = 0; l < sizeof(V) / sizeof(E); ++l) s += x[l];
  return s;
}
template <typename V, typename E>
inline E hmax(const V& x) {
  E s = x[0];
  for (size_t l = 1; l < sizeof(V) / sizeof(E); ++l) s = x[l] > s ? x[l] : s;
  return s;
}

// exp over the lanes (the flash, block and pattern attention kernels' softmax). float: Cephes' expf scheme (x = k ln2
// + r, a degree-5 polynomial, 2^k through the exponent bits; relative error ~2e-7), exactly 0 below -87 (so the
// masked scores, -inf, give 0). double: std::exp per lane (the gradient checks run in double).
inline VecOf<float>::type vexp(VecOf<float>::type x) {
  using V = VecOf<float>::type;
  typedef int32_t Vi __attribute__((vector_size(MIXLAB_ISA_VEC_BYTES)));
  const V lo = splat<V>(-87.0f), hi = splat<V>(88.0f);
  V xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  V k = xc * 1.44269504088896341f;
  k = (k + 12582912.0f) - 12582912.0f;  // round to nearest
  const V r = xc - k * 0.693359375f + k * 2.12194440e-4f;
  V p = splat<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const V er = p * r * r + r + 1.0f;
  const Vi bits = (__builtin_convertvector(k, Vi) + 127) << 23;
  const V e = er * (V)bits;  // a vector cast keeps the bits
  return x < lo ? V{} : e;
}
inline VecOf<double>::type vexp(VecOf<double>::type x) {
  VecOf<double>::type r;
  for (size_t l = 0; l < sizeof(r) / sizeof(double); ++l) r[l] = std::exp(x[l]);
  return r;
}

}  // namespace MIXLAB_NATIVE_NS
}  // namespace mixlab::native
