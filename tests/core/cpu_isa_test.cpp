// The instruction-set picker (mixlab/core/cpu_isa.h): MIXLAB_CPU_ISA lowers it, an unknown or
// unavailable name is an error naming the variable.
#include "mixlab/core/cpu_isa.h"

#include <gtest/gtest.h>

#include "mixlab/core/error.h"
#include "support/expect_error.h"
#include "support/isa_scope.h"

namespace cpu_isa_test {

using mixlab::testing::IsaScope;

TEST(CpuIsa, EnvironmentLowersTheSetAndBadNamesAreErrors) {
  const mixlab::CpuIsa best = [] {
    IsaScope unset("");
    return mixlab::cpu_isa();
  }();
  {
    IsaScope generic("generic");
    EXPECT_EQ(mixlab::cpu_isa(), mixlab::CpuIsa::kGeneric);
  }
  EXPECT_STREQ(mixlab::cpu_isa_name(mixlab::CpuIsa::kAvx2), "avx2");
  EXPECT_STREQ(mixlab::cpu_isa_name(mixlab::CpuIsa::kAvx512), "avx512");
  EXPECT_STREQ(mixlab::cpu_isa_name(mixlab::CpuIsa::kGeneric), "generic");
  {
    IsaScope bad("sse9");
    expect_error([] { mixlab::cpu_isa(); }, {"MIXLAB_CPU_ISA must be generic, avx2 or avx512", "sse9"});
  }
  if (best != mixlab::CpuIsa::kAvx512) {
    IsaScope above("avx512");
    expect_error([] { mixlab::cpu_isa(); }, "names an instruction set this CPU lacks");
  }
}

}  // namespace cpu_isa_test
