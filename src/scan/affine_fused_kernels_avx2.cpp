// The fused affine kernels (affine_fused_kernels.inc) for AVX2 + FMA: 32-byte vectors.
// CMakeLists.txt gives this file its -m flags; affine_fused.cpp calls it only on a CPU that has them.
#define MIXLAB_AFFINE_ISA avx2
#include "affine_fused_kernels.inc"
