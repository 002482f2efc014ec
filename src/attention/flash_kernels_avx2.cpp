// The native causal attention (flash_kernels.inc) for AVX2 + FMA: 32-byte registers.
// CMakeLists.txt gives this file its flags; causal_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_FLASH_ISA avx2
#include "flash_kernels.inc"
