// The resolvent op's plain loops (resolvent_plain_loops.inc) for the x86-64 baseline (or the only build on other
// architectures). CMakeLists.txt gives this file its flags; resolvent_op.cpp calls it only on a CPU that has them.
#define MIXLAB_RESOLVENT_LOOPS_ISA generic
#define MIXLAB_RESOLVENT_KERNEL_NS kernel_generic
#include "resolvent_plain_loops.inc"
