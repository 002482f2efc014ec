// mixlab/core/isa_dispatch.h — the one way a native kernel is built per instruction set and
// picked at run time.
//
// A kernel family writes its loops once (a `.inc` file) and compiles them three times, one object
// per set, each inside a namespace named after it (generic, avx2, avx512) and with its own -m
// flags (CMakeLists.txt); the private header declares the three with MIXLAB_DECLARE_PER_ISA, and
// the boundary picks one per call with MIXLAB_ISA_SELECT, from cpu_isa() read outside any
// parallel region (it may throw):
//
//   MIXLAB_DECLARE_PER_ISA(void conv(const ConvRows<float>&); void conv(const ConvRows<double>&);)
//   #define CONV_KERNELS(isa) Kernels<E>{fc::isa::conv, fc::isa::conv_backward}
//   const Kernels<E> k = MIXLAB_ISA_SELECT(cpu_isa(), CONV_KERNELS);
//
// On other architectures only the generic build exists, and MIXLAB_ISA_SELECT names nothing else.
// kVectorBytes (64: 16 floats or 8 doubles) is the width of the kernels' data layouts (lane groups,
// column chunks, the D multiples they accept), the same on every set. The arithmetic must run in
// the set's own registers (16, 32 or 64 bytes, MIXLAB_ISA_VEC_BYTES): GCC keeps a vector type wider
// than the registers on the stack, and the AVX2 builds of the FFT, attention and resolvent row
// kernels written in 64-byte vectors ran 8-30x slower than in 32-byte ones (2026-11-27).
#pragma once

#include <cstdint>

#include "mixlab/core/cpu_isa.h"

/// The register width, in bytes, of the instruction set this translation unit is compiled for:
/// the width a per-ISA kernel (`.inc`) computes in. Each per-ISA object gets its set's -m flags
/// (CMakeLists.txt), so the width follows them and cannot disagree with them.
#if defined(__AVX512F__)
#define MIXLAB_ISA_VEC_BYTES 64
#elif defined(__AVX2__)
#define MIXLAB_ISA_VEC_BYTES 32
#else
#define MIXLAB_ISA_VEC_BYTES 16
#endif

namespace mixlab {

/// The width of the per-ISA kernels' data layouts, in bytes (not their register width).
constexpr int64_t kVectorBytes = 64;

/// Lanes of one kVectorBytes vector of E (16 float, 8 double).
template <typename E>
constexpr int64_t vector_lanes() {
  return kVectorBytes / static_cast<int64_t>(sizeof(E));
}

}  // namespace mixlab

/// Declares the same functions in the namespaces generic, avx2 and avx512 (at the current scope).
#define MIXLAB_DECLARE_PER_ISA(...) \
  namespace generic {               \
  __VA_ARGS__                       \
  }                                 \
  namespace avx2 {                  \
  __VA_ARGS__                       \
  }                                 \
  namespace avx512 {                \
  __VA_ARGS__                       \
  }

/// `MAKE(avx512)`, `MAKE(avx2)` or `MAKE(generic)` for the set `isa` (a CpuIsa); MAKE(ns) must be
/// an expression of one type for the three namespaces.
#if defined(__x86_64__)
#define MIXLAB_ISA_SELECT(isa, MAKE) \
  ((isa) == ::mixlab::CpuIsa::kAvx512 ? MAKE(avx512) : (isa) == ::mixlab::CpuIsa::kAvx2 ? MAKE(avx2) : MAKE(generic))
#else
#define MIXLAB_ISA_SELECT(isa, MAKE) MAKE(generic)
#endif
