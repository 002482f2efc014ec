// pattern_attention's vector loops (pattern_attention_kernels.inc) for AVX2 + FMA: 32-byte vectors. CMakeLists.txt
// gives this file its flags; pattern_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_PATTERN_ATTENTION_ISA avx2
#include "pattern_attention_kernels.inc"
