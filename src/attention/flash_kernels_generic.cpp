// The native causal attention (flash_kernels.inc) for any x86-64 or other CPU: 16-byte vectors, register tiles of
// 4 rows by 2 (8 accumulators, 2 of B and a broadcast in the 16 xmm registers). CMakeLists.txt gives this file its
// flags; causal_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_FLASH_ISA generic
#define MIXLAB_FLASH_TILE_VECTORS 2
#include "flash_kernels.inc"
