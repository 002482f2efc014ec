#include "mixlab/core/cpu_isa.h"

#include <cstdlib>
#include <string>

#include "mixlab/core/error.h"

namespace mixlab {

namespace {

CpuIsa detect_cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CpuIsa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kGeneric;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kGeneric:
      break;
  }
  return "generic";
}

// Read per call: tests and benchmarks switch it; one getenv is nothing beside a kernel call.
CpuIsa cpu_isa() {
  static const CpuIsa best = detect_cpu_isa();
  const char* forced = std::getenv("MIXLAB_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return best;
  const std::string name = forced;
  CpuIsa want = CpuIsa::kGeneric;
  if (name == "avx512") {
    want = CpuIsa::kAvx512;
  } else if (name == "avx2") {
    want = CpuIsa::kAvx2;
  } else {
    MIXLAB_CHECK(name == "generic", "MIXLAB_CPU_ISA must be generic, avx2 or avx512, got '{}'", name);
  }
  MIXLAB_CHECK(static_cast<int>(want) <= static_cast<int>(best),
               "MIXLAB_CPU_ISA={} names an instruction set this CPU lacks (the best it has is {})", name,
               cpu_isa_name(best));
  return want;
}

}  // namespace mixlab
