// The selective scan's backward (selective_scan_kernels.inc) for any x86-64 or other CPU: 16-byte vectors.
// CMakeLists.txt gives this file its -m flags; selective_scan.cpp calls it only on a CPU that has them.
#define MIXLAB_SCAN_ISA generic
#include "selective_scan_kernels.inc"
