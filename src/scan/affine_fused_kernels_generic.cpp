// The fused affine kernels (affine_fused_kernels.inc) for any x86-64 or other CPU: 16-byte vectors.
// CMakeLists.txt gives this file its -m flags; affine_fused.cpp calls it only on a CPU that has them.
#define MIXLAB_AFFINE_ISA generic
#define MIXLAB_VEC_BYTES 16
#include "affine_fused_kernels.inc"
