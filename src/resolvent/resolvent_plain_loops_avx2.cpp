// The resolvent op's plain loops (resolvent_plain_loops.inc) for AVX2 + FMA. CMakeLists.txt gives
// this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_LOOPS_ISA avx2
#define MIXLAB_RESOLVENT_KERNEL_NS kernel_avx2
#include "resolvent_plain_loops.inc"
