// The native causal attention (flash_kernels.inc) for any x86-64 or other CPU: GCC splits the 64-byte vectors into
// 16-byte ones. CMakeLists.txt gives this file its flags; causal_attention.cpp calls it only on a CPU that has them.
#define MIXLAB_FLASH_ISA generic
#include "flash_kernels.inc"
