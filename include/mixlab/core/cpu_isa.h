// mixlab/core/cpu_isa.h — which x86 vector instruction set the native kernels run with.
//
// Kernels built more than once (scan's fused affine kernels, the Toeplitz FFT convolution and the
// causal attention per file, the resolvent op's row kernels per function) pick their build here,
// once per call and outside any parallel region:
// the best set this CPU has, or a lower one that the environment variable MIXLAB_CPU_ISA names
// (generic | avx2 | avx512; tests and benchmarks use it to run the lower builds on this machine).
// Not supported: other architectures' vector sets (every other CPU gets "generic").
#pragma once

namespace mixlab {

enum class CpuIsa { kGeneric, kAvx2, kAvx512 };  // ascending: kAvx2 means AVX2 with FMA

/// The set to run with. Reads MIXLAB_CPU_ISA on every call; throws mixlab::Error when it names an
/// unknown set or one this CPU lacks.
CpuIsa cpu_isa();

/// "generic", "avx2" or "avx512".
const char* cpu_isa_name(CpuIsa isa);

}  // namespace mixlab
