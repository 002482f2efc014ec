// pattern_attention's vector loops (pattern_attention_kernels.inc) for AVX-512F: 64-byte vectors (a D = 16 float row is
// one register; D = 8 runs in a 32-byte half). CMakeLists.txt gives this file its flags; pattern_attention.cpp calls it
// only on a CPU that has them.
#define MIXLAB_PATTERN_ATTENTION_ISA avx512
#include "pattern_attention_kernels.inc"
