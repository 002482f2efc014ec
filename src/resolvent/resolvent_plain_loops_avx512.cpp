// The resolvent op's plain loops (resolvent_plain_loops.inc) for AVX-512F. CMakeLists.txt gives
// this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_LOOPS_ISA avx512
#define MIXLAB_RESOLVENT_KERNEL_NS kernel_avx512
#include "resolvent_plain_loops.inc"
