// mixlab/core/blas_info.h: the line every report uses to name the BLAS kernels.
#include "mixlab/core/blas_info.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace mixlab {
namespace blas_info_test {
namespace {

TEST(BlasInfo, SummarySaysWhetherTheVariableChoseTheKernels) {
  BlasInfo info;
  EXPECT_EQ(blas_summary(info), "not OpenBLAS (openblas_get_corename not found)");
  info.openblas = true;
  info.version = "OpenBLAS 0.3.21";
  info.core = "Cooperlake";
  EXPECT_EQ(blas_summary(info), "OpenBLAS 0.3.21, Cooperlake kernels");
  info.coretype_env = "bogus";  // OpenBLAS falls back to its own choice for a name it does not know
  EXPECT_EQ(blas_summary(info), "OpenBLAS 0.3.21, Cooperlake kernels (OPENBLAS_CORETYPE=bogus set but not taken)");
  info.core = "Haswell";
  info.coretype_env = "haswell";
  info.forced = true;
  EXPECT_EQ(blas_summary(info), "OpenBLAS 0.3.21, Haswell kernels (forced by OPENBLAS_CORETYPE)");
}

// The process's own library answers: the test binary links LibTorch, whose matmuls run on the
// libblas.so.3 the system selected (OpenBLAS after scripts/setup.sh).
TEST(BlasInfo, AsksTheLoadedLibrary) {
  (void)torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));  // the BLAS is loaded and initialised
  const BlasInfo info = blas_info();
  if (!info.openblas) GTEST_SKIP() << "this process's BLAS is not OpenBLAS: " << blas_summary(info);
  EXPECT_FALSE(info.core.empty());
  EXPECT_EQ(info.version.rfind("OpenBLAS", 0), 0u) << info.version;
  EXPECT_EQ(blas_summary(), blas_summary(info));
}

}  // namespace
}  // namespace blas_info_test
}  // namespace mixlab
