// The native FFT convolution (fft_conv_kernels.inc) for any x86-64 or other CPU: each 64-byte group
// as four 16-byte vectors (SSE2 on x86-64). toeplitz_fft.cpp runs it where no wider set is
// available.
#define MIXLAB_FFT_ISA generic
#include "fft_conv_kernels.inc"
