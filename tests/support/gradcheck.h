// tests/support/gradcheck.h — the one finite-difference gradient check mixlab's tests share.
//
// LibTorch's C++ API has no gradcheck. This one checks, in double, that autograd's gradient of
// the scalar <fn(inputs), v> (v a fixed random projection) matches central differences in every
// element of every input that requires grad. Cost: 2 evaluations of fn per input element, so use
// small shapes.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace mixlab::testing {

using TensorFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;
  uint64_t seed = 1234;
};

/// Inputs must be float64; those with requires_grad() are checked.
::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<at::Tensor>& inputs,
                                     GradcheckOptions options = {});

/// max |a - b| / (atol + rtol * |b|) <= 1 elementwise, with a readable failure message.
::testing::AssertionResult all_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol);

}  // namespace mixlab::testing
