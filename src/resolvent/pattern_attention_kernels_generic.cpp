// pattern_attention's vector loops (pattern_attention_kernels.inc) for the baseline (SSE2) build. CMakeLists.txt
// gives this file its flags; pattern_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_PATTERN_ATTENTION_ISA generic
#include "pattern_attention_kernels.inc"
