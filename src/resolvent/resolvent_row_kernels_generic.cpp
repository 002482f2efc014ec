// The resolvent op's register-accumulator forward and backward (resolvent_row_kernels.inc) for any x86-64 or other CPU:
// 16-byte vectors, 4 per chunk keep u and w in 8 of the 16 xmm registers. CMakeLists.txt gives this file its flags;
// resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_ROWS_ISA generic
#define MIXLAB_RESOLVENT_ROWS_CHUNK 4
#include "resolvent_row_kernels.inc"
