// The resolvent op's register-accumulator forward (resolvent_row_kernels.inc) for AVX2 + FMA: 32-byte vectors, 4 per
// chunk keep u and w in 8 of the 16 ymm registers. CMakeLists.txt gives this file its flags; resolvent_op.cpp calls
// it only on a CPU that has them.
#define MIXLAB_RESOLVENT_ROWS_ISA avx2
#define MIXLAB_RESOLVENT_ROWS_CHUNK 4
#include "resolvent_row_kernels.inc"
