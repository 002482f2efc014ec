#include "mixlab/core/tensor_checks.h"

#include "mixlab/core/error.h"

namespace mixlab {

std::string shape_string(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  return fmt::format("[{}]", fmt::join(t.sizes().vec(), ","));
}

void check_defined(const char* fn, const char* name, const at::Tensor& t) {
  MIXLAB_CHECK(t.defined(), "{}: {} must be a defined tensor, got an undefined one", fn, name);
}

void check_dim(const char* fn, const char* name, const at::Tensor& t, int64_t dim, const char* letters) {
  check_defined(fn, name, t);
  MIXLAB_CHECK(t.dim() == dim, "{}: {} must have {} dimensions {}, got shape {}", fn, name, dim, letters,
               shape_string(t));
}

void check_shape(const char* fn, const char* name, const at::Tensor& t, const std::vector<int64_t>& expected,
                 const char* letters) {
  check_dim(fn, name, t, static_cast<int64_t>(expected.size()), letters);
  bool ok = true;
  for (size_t i = 0; i < expected.size(); ++i) ok = ok && (expected[i] < 0 || t.size(i) == expected[i]);
  if (!ok) {
    std::vector<std::string> want;
    for (auto e : expected) want.push_back(e < 0 ? std::string("*") : std::to_string(e));
    MIXLAB_FAIL("{}: {} must have shape {} = [{}], got {}", fn, name, letters, fmt::join(want, ","), shape_string(t));
  }
}

void check_floating(const char* fn, const char* name, const at::Tensor& t) {
  check_defined(fn, name, t);
  MIXLAB_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble,
               "{}: {} must be float32 or float64, got {}", fn, name, c10::toString(t.scalar_type()));
}

void check_same_dtype(const char* fn, const char* name, const at::Tensor& t, const char* ref_name,
                      const at::Tensor& ref) {
  MIXLAB_CHECK(t.scalar_type() == ref.scalar_type(), "{}: {} must have the dtype of {} ({}), got {}", fn, name,
               ref_name, c10::toString(ref.scalar_type()), c10::toString(t.scalar_type()));
}

void check_cpu(const char* fn, const char* name, const at::Tensor& t) {
  check_defined(fn, name, t);
  MIXLAB_CHECK(t.device().is_cpu(), "{}: {} must be on the CPU (mixlab kernels are CPU kernels), got device {}", fn,
               name, t.device().str());
}

}  // namespace mixlab
