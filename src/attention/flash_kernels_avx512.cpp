// The native causal attention (flash_kernels.inc) for AVX-512F: 64-byte vectors, register tiles of 4 rows by 4
// (16 accumulators, 4 of B and a broadcast in the 32 zmm registers). CMakeLists.txt gives this file its flags;
// causal_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_FLASH_ISA avx512
#define MIXLAB_FLASH_TILE_VECTORS 4
#include "flash_kernels.inc"
