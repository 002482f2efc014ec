// The native FFT convolution (fft_conv_kernels.inc) for AVX2 + FMA: each 64-byte group as two
// 32-byte registers. CMakeLists.txt gives this file its flags; toeplitz_fft.cpp calls it only on a
// CPU that has them.
#define MIXLAB_FFT_ISA avx2
#include "fft_conv_kernels.inc"
