// ReferenceGuard (one switch per op from a native kernel to its reference: nests, per op, per
// thread) and the per-instruction-set pick of core/isa_dispatch.h.
#include "mixlab/core/reference_guard.h"

#include <gtest/gtest.h>

#include <thread>

#include "mixlab/core/isa_dispatch.h"

namespace reference_guard_test {

namespace {

struct OpA;
struct OpB;

// Three "builds" of one kernel, as a per-ISA kernel header declares them.
namespace kernels {
MIXLAB_DECLARE_PER_ISA(const char* name();)
namespace generic {
const char* name() { return "generic"; }
}  // namespace generic
namespace avx2 {
const char* name() { return "avx2"; }
}  // namespace avx2
namespace avx512 {
const char* name() { return "avx512"; }
}  // namespace avx512
}  // namespace kernels

#define KERNEL_NAME(ns) kernels::ns::name()
std::string picked(mixlab::CpuIsa isa) { return MIXLAB_ISA_SELECT(isa, KERNEL_NAME); }
#undef KERNEL_NAME

}  // namespace

TEST(ReferenceGuard, NestsAndIsPerOp) {
  using GuardA = mixlab::ReferenceGuard<OpA>;
  EXPECT_FALSE(GuardA::active());
  {
    GuardA outer;
    EXPECT_TRUE(GuardA::active());
    EXPECT_FALSE(mixlab::ReferenceGuard<OpB>::active());  // another op keeps its native path
    {
      GuardA inner;
      EXPECT_TRUE(GuardA::active());
    }
    EXPECT_TRUE(GuardA::active());  // the outer guard still holds
  }
  EXPECT_FALSE(GuardA::active());
}

TEST(ReferenceGuard, IsPerThread) {
  mixlab::ReferenceGuard<OpA> guard;
  bool seen_in_other_thread = true;
  std::thread([&] { seen_in_other_thread = mixlab::ReferenceGuard<OpA>::active(); }).join();
  EXPECT_FALSE(seen_in_other_thread);
  EXPECT_TRUE(mixlab::ReferenceGuard<OpA>::active());
}

TEST(IsaDispatch, PicksTheBuildOfTheSet) {
  EXPECT_EQ(picked(mixlab::CpuIsa::kGeneric), "generic");
#if defined(__x86_64__)
  EXPECT_EQ(picked(mixlab::CpuIsa::kAvx2), "avx2");
  EXPECT_EQ(picked(mixlab::CpuIsa::kAvx512), "avx512");
#else
  EXPECT_EQ(picked(mixlab::CpuIsa::kAvx2), "generic");  // only the generic build exists there
#endif
  EXPECT_EQ(mixlab::vector_lanes<float>(), 16);
  EXPECT_EQ(mixlab::vector_lanes<double>(), 8);
}

}  // namespace reference_guard_test
