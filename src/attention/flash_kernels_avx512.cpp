// The native causal attention (flash_kernels.inc) for AVX-512F: 64-byte registers.
// CMakeLists.txt gives this file its flags; causal_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_FLASH_ISA avx512
#include "flash_kernels.inc"
