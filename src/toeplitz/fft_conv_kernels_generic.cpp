// The native FFT convolution (fft_conv_kernels.inc) for any x86-64 or other CPU: GCC splits the
// 64-byte vectors into 16-byte ones. toeplitz_fft.cpp runs it where no wider set is available.
#define MIXLAB_FFT_ISA generic
#include "fft_conv_kernels.inc"
