// Private: the native FFT convolution behind the Toeplitz op's FFT path (toeplitz_fft.cpp), on raw
// rows of one (batch, head) and one group of column pairs, compiled once per instruction set
// (fft_conv_kernels_*.cpp) and picked at run time. No LibTorch header: the per-ISA objects are
// built with their own -m flags and must not share the precompiled header.
//
// The method. Columns c and c + L of x (L = ceil(D/2)) travel as the real and imaginary parts of
// one complex sequence z = x_c + i x_{c+L}: the lags are real, so conv(t, z) = conv(t, x_c) +
// i conv(t, x_{c+L}) and one complex FFT of size n carries two columns. A group holds
// kGroupBytes of such pairs as vector lanes (16 in float, 8 in double), so every butterfly is a
// few vector operations with one scalar twiddle, and the group's whole sequence (n points, 2 n
// vectors) is one buffer. The forward transform is decimation in frequency (natural order in,
// bit-reversed out), the inverse decimation in time (bit-reversed in, natural out), so no
// reordering pass is needed; the kernel spectrum is handed in bit-reversed order. Both run depth
// first: once a sub-transform fits in L1 it is finished there, multiplied by the kernel spectrum
// and transformed back before the next one is touched, and the outermost stages are fused with
// the loads of x (whose upper half is the zero padding) and the stores of y.
#pragma once

#include <cstdint>

#include "mixlab/core/isa_dispatch.h"

namespace mixlab::detail::fft_conv {

/// Complex lanes per group for element type E (16 float, 8 double): one kVectorBytes vector, the
/// layout of the work buffers whatever the instruction set (the AVX2 and generic builds operate on
/// a group as two or four native vectors, fft_conv_kernels.inc).
template <typename E>
constexpr int64_t group_lanes() {
  return vector_lanes<E>();
}

/// The constants of one call: n = the FFT size (a power of two >= 2T), twiddles w^j =
/// exp(-2 pi i j / n) for j < n/2 (tw_re then tw_im, n/2 each), and the kernel spectrum K = FFT_n
/// of the zero-padded lags of this head in bit-reversed order (k_re then k_im, n each).
template <typename E>
struct Spectrum {
  const E* tw_re;
  const E* tw_im;
  const E* k_re;
  const E* k_im;
  int64_t n;
};

/// y = the causal convolution of x with this head's lags (+ bias[t] per row), for the column
/// pairs of lane group `group`: rows are T rows of D columns with unit column stride, row stride
/// x_row / y_row. work: 2 n group_lanes<E>() elements, 64-byte aligned.
template <typename E>
struct ConvRows {
  const E* x;
  int64_t x_row;
  E* y;
  int64_t y_row;
  const E* bias;  // T values, or null
  Spectrum<E> s;
  E* work;
  int64_t T, D, group;
};

/// The backward of ConvRows for the same (batch, head, group), given g = dL/dy:
///   dx = the causal correlation of g with the lags (spectrum conj(K) G), when dx is not null;
///   p[f] += sum over the group's lanes of conj(Zx[f]) Zg[f] (f in bit-reversed order, p_re then
///   p_im, n each), when p is not null. Re(IFFT(p)) summed over groups is then dL/dt (the
///   packing of two columns per lane cancels in the real part; toeplitz_fft.cpp).
/// work: 4 n group_lanes<E>() elements, 64-byte aligned.
template <typename E>
struct ConvGradRows {
  const E* g;
  int64_t g_row;
  const E* x;
  int64_t x_row;
  E* dx;  // or null
  int64_t dx_row;
  E* p_re;  // or null (both)
  E* p_im;
  Spectrum<E> s;
  E* work;
  int64_t T, D, group;
};

MIXLAB_DECLARE_PER_ISA(void conv(const ConvRows<float>& r); void conv(const ConvRows<double>& r);
                       void conv_backward(const ConvGradRows<float>& r);
                       void conv_backward(const ConvGradRows<double>& r);)

}  // namespace mixlab::detail::fft_conv
