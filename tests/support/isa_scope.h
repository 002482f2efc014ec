// tests/support/isa_scope.h — sets MIXLAB_CPU_ISA (mixlab/core/cpu_isa.h) for one scope: the tests
// of kernels built per instruction set run every set the CPU has through it.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

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

}  // namespace mixlab::testing
