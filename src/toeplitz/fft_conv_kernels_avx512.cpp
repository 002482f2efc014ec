// The native FFT convolution (fft_conv_kernels.inc) for AVX-512F: 64-byte registers.
// CMakeLists.txt gives this file its flags; toeplitz_fft.cpp calls it only on a CPU that has them.
#define MIXLAB_FFT_ISA avx512
#include "fft_conv_kernels.inc"
