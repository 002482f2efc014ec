#include "support/gradcheck.h"

#include <sstream>

namespace mixlab::testing {

::testing::AssertionResult all_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol) {
  if (actual.sizes() != expected.sizes()) {
    std::ostringstream os;
    os << "shape mismatch: actual " << actual.sizes() << " vs expected " << expected.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  if (actual.numel() == 0) return ::testing::AssertionSuccess();
  auto a = actual.detach().to(at::kDouble);
  auto e = expected.detach().to(at::kDouble);
  auto nan_mismatch = (a.isnan() != e.isnan()).any().item<bool>();
  if (nan_mismatch) return ::testing::AssertionFailure() << "NaN positions differ";
  auto finite = ~e.isnan();
  auto diff = (a - e).abs().masked_fill(~finite, 0);
  auto bound = atol + rtol * e.abs().masked_fill(~finite, 0);
  auto ratio = diff / bound;
  double worst = ratio.max().item<double>();
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  auto flat = ratio.reshape(-1).argmax().item<int64_t>();
  std::ostringstream os;
  os << "max |actual-expected| = " << diff.max().item<double>() << " (worst at flat index " << flat << ": actual "
     << a.reshape(-1)[flat].item<double>() << ", expected " << e.reshape(-1)[flat].item<double>() << "), rtol=" << rtol
     << " atol=" << atol;
  return ::testing::AssertionFailure() << os.str();
}

::testing::AssertionResult gradcheck(const TensorFn& fn, const std::vector<at::Tensor>& inputs_in,
                                     GradcheckOptions options) {
  std::vector<at::Tensor> inputs;
  for (const auto& t : inputs_in) {
    if (t.defined() && t.scalar_type() != at::kDouble)
      return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    inputs.push_back(t.defined() ? t.detach().clone().requires_grad_(t.requires_grad()) : t);
  }
  torch::manual_seed(options.seed);
  at::Tensor out = fn(inputs);
  at::Tensor v = torch::randn_like(out);
  auto analytic_inputs = std::vector<at::Tensor>();
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) analytic_inputs.push_back(t);
  if (analytic_inputs.empty()) return ::testing::AssertionFailure() << "no input requires grad";
  auto grads = torch::autograd::grad({(out * v).sum()}, analytic_inputs, {}, false, false, true);

  torch::NoGradGuard no_grad;
  size_t gi = 0;
  for (size_t n = 0; n < inputs.size(); ++n) {
    auto& t = inputs[n];
    if (!t.defined() || !t.requires_grad()) continue;
    at::Tensor analytic = grads[gi++];
    if (!analytic.defined()) analytic = torch::zeros_like(t);
    auto numeric = torch::zeros(t.sizes(), t.options());  // contiguous, whatever t's strides
    auto base = t.detach().clone();
    auto flat_base = base.reshape(-1);
    auto flat_num = numeric.view(-1);
    for (int64_t e = 0; e < flat_base.numel(); ++e) {
      auto eval = [&](double delta) {
        auto perturbed = base.clone();
        perturbed.view(-1)[e] += delta;
        auto args = inputs;
        args[n] = perturbed;
        return (fn(args) * v).sum().item<double>();
      };
      flat_num[e] = (eval(options.eps) - eval(-options.eps)) / (2 * options.eps);
    }
    auto r = all_close(analytic, numeric, options.rtol, options.atol);
    if (!r)
      return ::testing::AssertionFailure()
             << "gradient of input " << n << " differs from finite differences: " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mixlab::testing
