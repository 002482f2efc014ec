// The resolvent op's register-accumulator forward and backward (resolvent_row_kernels.inc) for AVX-512F: 64-byte
// vectors, 4 per chunk (D = 64 floats in one chunk) keep u and w in 8 of the 32 zmm registers; head dims that are
// not whole 64-byte vectors (D = 8 floats) run in 32- or 16-byte ones. CMakeLists.txt gives
// this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_ROWS_ISA avx512
#define MIXLAB_RESOLVENT_ROWS_CHUNK 4
#include "resolvent_row_kernels.inc"
