// mixlab/core/blas_info.h — which BLAS library, and which of its kernels, LibTorch's matmuls run.
//
// Training steps are mostly sgemm, so a figure (a time, and every cell that moves with the last
// bits) belongs to the BLAS kernels as much as to mixlab's own. Debian's OpenBLAS is built with
// DYNAMIC_ARCH: it picks its kernels per CPU at load time, unless the environment variable
// OPENBLAS_CORETYPE names other ones. A VM used for this project exported
// OPENBLAS_CORETYPE=Haswell to every process, which made training 15–25 % slower than OpenBLAS's
// own choice and moved cells (docs/log/benchmarks-2026-11.md, "OpenBLAS's core on the Zen 5 VM").
// `mixlab --version`, compare's footer and compare.json, and the benchmarks' context name them.
#pragma once

#include <string>

namespace mixlab {

struct BlasInfo {
  bool openblas = false;     // false: the loaded BLAS does not export openblas_get_corename
  std::string version;       // "OpenBLAS 0.3.21" (the first two words of openblas_get_config())
  std::string core;          // the kernels in use, as OpenBLAS names them: "Cooperlake", "Haswell", ...
  std::string coretype_env;  // $OPENBLAS_CORETYPE as set ("" when unset)
  bool forced = false;       // the kernels in use are the ones OPENBLAS_CORETYPE names
};

/// Asks the loaded library (dlsym in the process's global scope, so it reports the library the
/// process actually runs, whatever libblas.so.3 points to on disk). Never throws.
BlasInfo blas_info();

/// One line for reports: "OpenBLAS 0.3.21, Cooperlake kernels", "OpenBLAS 0.3.21, Haswell kernels
/// (forced by OPENBLAS_CORETYPE)", "OpenBLAS 0.3.21, Cooperlake kernels (OPENBLAS_CORETYPE=x set
/// but not taken)", or "not OpenBLAS (openblas_get_corename not found)".
std::string blas_summary(const BlasInfo& info);
std::string blas_summary();

}  // namespace mixlab
