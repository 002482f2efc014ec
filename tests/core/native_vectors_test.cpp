// mixlab/core/native_vectors.h in this file's build (the baseline's 16-byte vectors): the partial
// loads and stores touch only their m elements, the butterfly reductions give every lane the
// maximum or the sum, the transposing lane sums give each slot its own sum (few_lane_sums the
// same sums as one tree per vector, row_lane_sums those of narrower row vectors), transpose_square
// and transpose_padded transpose, vexp is exp, and
// with_row_vector takes rows of whole 16-byte vectors. The AVX2 and AVX-512 builds of the same
// templates run inside the kernels that include them (the pattern attention, flash, block
// attention, resolvent row and fused affine tests run every set this CPU has).
#include "mixlab/core/native_vectors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace native_vectors_test {

namespace {

using namespace mixlab::native;

template <typename E>
void check_partial_loads_and_stores() {
  using V = typename VecOf<E>::type;
  constexpr int64_t L = native_lanes<E>();
  for (int64_t m = 0; m <= L; ++m) {
    // m elements, then values a load must not see and a store must not touch.
    std::vector<E> src(static_cast<size_t>(L), E(-7));
    for (int64_t l = 0; l < m; ++l) src[static_cast<size_t>(l)] = E(l + 1);
    const V v = load_partial<V>(src.data(), m, E(42));
    for (int64_t l = 0; l < L; ++l) EXPECT_EQ(v[l], l < m ? E(l + 1) : E(42)) << "m " << m << " lane " << l;
    std::vector<E> dst(static_cast<size_t>(L), E(-3));
    store_partial(dst.data(), splat<V>(E(5)), m);
    for (int64_t l = 0; l < L; ++l) EXPECT_EQ(dst[static_cast<size_t>(l)], l < m ? E(5) : E(-3)) << "m " << m;
  }
}

TEST(NativeVectors, PartialLoadsAndStoresTouchOnlyTheirElements) {
  check_partial_loads_and_stores<float>();
  check_partial_loads_and_stores<double>();
}

TEST(NativeVectors, ReductionsAndLaneSums) {
  using V = VecOf<float>::type;
  constexpr int N = static_cast<int>(native_lanes<float>());
  V v;
  for (int l = 0; l < N; ++l) v[l] = static_cast<float>((l * 5) % N) - 1.5f;
  const V top = lanes_reduced<true>(v), sum = lanes_reduced<false>(v);
  float want_top = v[0], want_sum = 0;
  for (int l = 0; l < N; ++l) want_top = std::max(want_top, v[l]), want_sum += v[l];
  for (int l = 0; l < N; ++l) {
    EXPECT_EQ(top[l], want_top);
    EXPECT_FLOAT_EQ(sum[l], want_sum);
  }
  V acc[N];
  for (int s = 0; s < N; ++s)
    for (int l = 0; l < N; ++l) acc[s][l] = static_cast<float>(s * 100 + l);
  const V sums = lane_sums<V, N>(acc);
  for (int s = 0; s < N; ++s) EXPECT_FLOAT_EQ(sums[s], static_cast<float>(s * 100 * N + N * (N - 1) / 2)) << s;
}

// few_lane_sums<V, R>: lane r is lane_total(acc[r]) bit for bit (the same halves-first order),
// for every power of two R up to the lanes; values of mixed size so that the order shows.
template <typename E, int R>
void check_few_lane_sums() {
  using V = typename VecOf<E>::type;
  constexpr int N = lane_count<V>();
  V acc[R], copy[R];
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < N; ++l) acc[r][l] = E(1) / E(3 + 7 * r + l) * (l % 2 ? E(1e4) : E(-1));
  for (int r = 0; r < R; ++r) copy[r] = acc[r];
  const V sums = few_lane_sums<V, R>(copy);
  for (int r = 0; r < R; ++r) EXPECT_EQ(sums[r], (lane_total<V, E>(acc[r]))) << "R " << R << " row " << r;
}

TEST(NativeVectors, FewLaneSumsEqualEachRowsTotal) {
  check_few_lane_sums<float, 1>();
  check_few_lane_sums<float, 2>();
  check_few_lane_sums<float, native_lanes<float>()>();
  check_few_lane_sums<double, 1>();
  check_few_lane_sums<double, native_lanes<double>()>();
}

// transpose_square: row r lane c goes to row c lane r, every element exactly once.
template <typename E>
void check_transpose_square() {
  using V = typename VecOf<E>::type;
  constexpr int N = lane_count<V>();
  V m[N];
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) m[r][c] = E(100 * r + c);
  transpose_square(m);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) EXPECT_EQ(m[r][c], E(100 * c + r)) << "row " << r << " lane " << c;
}

TEST(NativeVectors, TransposeSquareTransposes) {
  check_transpose_square<float>();
  check_transpose_square<double>();
}

// row_lane_sums: row vectors of a half or a quarter of the native one (here 8- and 4-byte vectors
// under this build's 16 bytes; a ymm or xmm under AVX-512), lane s = the sum of acc[s]'s lanes.
template <typename V, typename RV>
void check_row_lane_sums() {
  using E = std::remove_reference_t<decltype(std::declval<V>()[0])>;
  constexpr int N = lane_count<V>(), LR = lane_count<RV>();
  RV acc[N];
  for (int s = 0; s < N; ++s)
    for (int l = 0; l < LR; ++l) acc[s][l] = E(s * 100 + l * 3 + 1);
  const V sums = row_lane_sums<V>(acc);
  for (int s = 0; s < N; ++s)
    EXPECT_EQ(sums[s], E(s * 100 * LR + 3 * LR * (LR - 1) / 2 + LR)) << "N " << N << " LR " << LR << " slot " << s;
}

TEST(NativeVectors, RowLaneSumsOfNarrowerRowVectors) {
  typedef float F2 __attribute__((vector_size(8)));
  typedef float F1 __attribute__((vector_size(4)));
  typedef double D1 __attribute__((vector_size(8)));
  check_row_lane_sums<VecOf<float>::type, VecOf<float>::type>();
  check_row_lane_sums<VecOf<float>::type, F2>();
  check_row_lane_sums<VecOf<float>::type, F1>();
  check_row_lane_sums<VecOf<double>::type, D1>();
}

// transpose_padded against element-by-element: every shape of rows and columns around the block
// sizes (native blocks and an element tail in this 16-byte build; the narrower square blocks of
// the AVX2 and AVX-512 builds run in the attention kernels' tests at D 8), the padding columns zero.
template <typename E>
void check_transpose_padded() {
  for (int64_t rows = 0; rows <= 13; ++rows)
    for (int64_t cols = 1; cols <= 13; ++cols) {
      const int64_t x_row = cols + 3, rows_p = rows + 5;
      std::vector<E> x(static_cast<size_t>(std::max<int64_t>(rows, 1) * x_row));
      for (size_t i = 0; i < x.size(); ++i) x[i] = E(i + 1);
      std::vector<E> bt(static_cast<size_t>(cols * rows_p), E(-1));
      transpose_padded(x.data(), x_row, rows, rows_p, cols, bt.data());
      for (int64_t d = 0; d < cols; ++d)
        for (int64_t j = 0; j < rows_p; ++j)
          ASSERT_EQ(bt[static_cast<size_t>(d * rows_p + j)], j < rows ? x[static_cast<size_t>(j * x_row + d)] : E(0))
              << "rows " << rows << " cols " << cols << " at (" << d << ", " << j << ")";
    }
}

TEST(NativeVectors, TransposePaddedTransposesAndPads) {
  check_transpose_padded<float>();
  check_transpose_padded<double>();
}

TEST(NativeVectors, VexpIsExpAndZeroFarBelow) {
  using V = VecOf<float>::type;
  constexpr int N = static_cast<int>(native_lanes<float>());
  for (float x0 : {-80.0f, -10.0f, -1.0f, 0.0f, 3.0f, 80.0f}) {
    V x;
    for (int l = 0; l < N; ++l) x[l] = x0 + 0.37f * static_cast<float>(l);
    const V e = vexp(x);
    for (int l = 0; l < N; ++l) EXPECT_NEAR(e[l], std::exp(x[l]), 4e-7f * std::exp(x[l])) << x[l];
  }
  const V e = vexp(splat<V>(-std::numeric_limits<float>::infinity()));
  for (int l = 0; l < N; ++l) EXPECT_EQ(e[l], 0.0f);
}

}  // namespace

// with_row_vector in this build (16-byte vectors): rows of a multiple of row_vector_lanes run in
// one 16-byte vector type; any other length is refused without calling f. The narrower choices
// of the AVX2 and AVX-512 builds (a ymm or xmm for D 8, 12, 24) run in the flash and block
// attention tests' head dims on every set this CPU has.
template <typename E>
void check_row_vector_choice() {
  constexpr int64_t lanes = row_vector_lanes<E>();
  for (int64_t n = 1; n <= 6 * lanes; ++n) {
    int64_t bytes = 0;
    const bool ran = with_row_vector<E>(n, [&](auto* tag) { bytes = static_cast<int64_t>(sizeof(*tag)); });
    EXPECT_EQ(ran, n % lanes == 0) << "n " << n;
    EXPECT_EQ(bytes, ran ? 16 : 0) << "n " << n;
  }
}

TEST(NativeVectors, RowVectorsTakeEveryMultipleOfSixteenBytes) {
  EXPECT_EQ(row_vector_lanes<float>(), 4);
  EXPECT_EQ(row_vector_lanes<double>(), 2);
  check_row_vector_choice<float>();
  check_row_vector_choice<double>();
}

}  // namespace native_vectors_test
