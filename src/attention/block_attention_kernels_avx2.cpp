// The native block cross-attention (block_attention_kernels.inc) for AVX2 + FMA: 32-byte vectors. CMakeLists.txt
// gives this file its flags; block_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_BLOCK_ATTENTION_ISA avx2
#include "block_attention_kernels.inc"
