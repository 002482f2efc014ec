// The native block cross-attention (block_attention_kernels.inc) for AVX-512F: 64-byte vectors. CMakeLists.txt
// gives this file its flags; block_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_BLOCK_ATTENTION_ISA avx512
#include "block_attention_kernels.inc"
