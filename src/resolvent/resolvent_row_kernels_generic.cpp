// The resolvent op's register-accumulator forward (resolvent_row_kernels.inc) for any x86-64 or other CPU: GCC splits
// the 64-byte vectors into 16-byte ones; 1 vector per chunk keeps u and w in 8 of the 16 xmm registers. CMakeLists.txt
// gives this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_ROWS_ISA generic
#define MIXLAB_RESOLVENT_ROWS_CHUNK 1
#include "resolvent_row_kernels.inc"
