// tests/support/isa_scope.h — sets MIXLAB_CPU_ISA (mixlab/core/cpu_isa.h) for one scope: the tests
// of kernels built per instruction set run every set the CPU has through it.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "mixlab/core/cpu_isa.h"

namespace mixlab::testing {

// Sets MIXLAB_CPU_ISA for its lifetime (unset when `isa` is empty), restoring the old value.
class IsaScope {
 public:
  explicit IsaScope(const std::string& isa) {
    if (const char* old = std::getenv("MIXLAB_CPU_ISA")) old_ = old;
    if (isa.empty()) {
      ::unsetenv("MIXLAB_CPU_ISA");
    } else {
      ::setenv("MIXLAB_CPU_ISA", isa.c_str(), 1);
    }
  }
  ~IsaScope() {
    if (old_) {
      ::setenv("MIXLAB_CPU_ISA", old_->c_str(), 1);
    } else {
      ::unsetenv("MIXLAB_CPU_ISA");
    }
  }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  std::optional<std::string> old_;
};

// Every instruction set this CPU runs (mixlab/core/cpu_isa.h), the best first, whatever
// MIXLAB_CPU_ISA says outside: the builds a per-ISA kernel test must cover here.
inline std::vector<std::string> isas_this_cpu_runs() {
  IsaScope none("");
  const CpuIsa best = cpu_isa();
  std::vector<std::string> out;
  if (best >= CpuIsa::kAvx512) out.push_back("avx512");
  if (best >= CpuIsa::kAvx2) out.push_back("avx2");
  out.push_back("generic");
  return out;
}

}  // namespace mixlab::testing
