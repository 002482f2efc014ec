// The resolvent op's register-accumulator forward and backward (resolvent_row_kernels.inc) for AVX2 + FMA: 32-byte
// vectors, 4 per chunk keep u and w in 8 of the 16 ymm registers. The backward's gather pass takes chunks of 8 (a whole
// D = 64 row; its two sums spill a little): each reader's far coefficients are then read once per row, not twice
// (pow2 T 16384 forward+backward 1.18x faster, T 1024 3 % slower; 2026-11-28, on an AVX-512 CPU running this build).
// CMakeLists.txt gives this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_ROWS_ISA avx2
#define MIXLAB_RESOLVENT_ROWS_CHUNK 4
#define MIXLAB_RESOLVENT_GATHER_CHUNK 8
#include "resolvent_row_kernels.inc"
