// The selective scan's backward (selective_scan_kernels.inc) for AVX-512F: 64-byte vectors.
// CMakeLists.txt gives this file its -m flags; selective_scan.cpp calls it only on a CPU that has them.
#define MIXLAB_SCAN_ISA avx512
#include "selective_scan_kernels.inc"
