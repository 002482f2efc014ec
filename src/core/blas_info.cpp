#include "mixlab/core/blas_info.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>
#include <sstream>

namespace mixlab {

namespace {

using CharFn = char* (*)();

// RTLD_DEFAULT searches the libraries the process loaded (LibTorch's libblas.so.3 is OpenBLAS
// itself, or links it): no second copy is opened, so the answer is about the kernels in use.
const char* call_if_exported(const char* symbol) {
  void* fn = dlsym(RTLD_DEFAULT, symbol);
  if (fn == nullptr) return nullptr;
  return reinterpret_cast<CharFn>(fn)();
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo info;
  if (const char* env = std::getenv("OPENBLAS_CORETYPE")) info.coretype_env = env;
  const char* core = call_if_exported("openblas_get_corename");
  if (core == nullptr) return info;
  info.openblas = true;
  info.core = core;
  if (const char* config = call_if_exported("openblas_get_config")) {
    std::istringstream words(config);
    std::string name, number;
    words >> name >> number;
    info.version = number.empty() ? name : name + " " + number;
  }
  if (info.version.empty()) info.version = "OpenBLAS";
  // OpenBLAS compares the variable case-insensitively, and falls back to other kernels for a name
  // it does not know or kernels this CPU cannot run: only a match means the variable chose them.
  info.forced = !info.coretype_env.empty() && strcasecmp(info.coretype_env.c_str(), info.core.c_str()) == 0;
  return info;
}

std::string blas_summary(const BlasInfo& info) {
  if (!info.openblas) return "not OpenBLAS (openblas_get_corename not found)";
  std::string s = info.version + ", " + info.core + " kernels";
  if (info.forced) {
    s += " (forced by OPENBLAS_CORETYPE)";
  } else if (!info.coretype_env.empty()) {
    s += " (OPENBLAS_CORETYPE=" + info.coretype_env + " set but not taken)";
  }
  return s;
}

std::string blas_summary() { return blas_summary(blas_info()); }

}  // namespace mixlab
