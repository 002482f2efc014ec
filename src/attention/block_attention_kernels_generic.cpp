// The native block cross-attention (block_attention_kernels.inc) for any x86-64 (or other) CPU: 16-byte vectors.
// CMakeLists.txt gives this file its flags; block_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_BLOCK_ATTENTION_ISA generic
#include "block_attention_kernels.inc"
