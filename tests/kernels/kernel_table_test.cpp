// Every row of the kernel table (tests/kernels/kernel_table.h): forward parity fast vs reference
// on the row's grid in float32 and float64, backward parity under the same upstream gradients,
// a finite-difference gradcheck in double on the row's gradcheck shape; and the table itself:
// a row for every kernel of kRequiredKernels, rows well formed.
#include "kernels/kernel_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

namespace mixlab::testing {

// gtest prints a failing parameter: the row's name, not its bytes.
void PrintTo(const KernelCase& row, std::ostream* os) { *os << row.name; }

namespace {

const char* dtype_name(torch::ScalarType dtype) { return dtype == torch::kFloat ? "float32" : "float64"; }

Tolerance forward_tolerance(const KernelCase& row, torch::ScalarType dtype) {
  return dtype == torch::kFloat ? row.forward_f32 : row.forward_f64;
}
Tolerance backward_tolerance(const KernelCase& row, torch::ScalarType dtype) {
  return dtype == torch::kFloat ? row.backward_f32 : row.backward_f64;
}

KernelInputs inputs_for(const KernelCase& row, const Shape& shape, torch::ScalarType dtype) {
  return row.make_inputs(shape, dtype, kernel_seed(row.name, shape.label()));
}

void expect_outputs_close(const KernelCase& row, const Tensors& fast, const Tensors& reference, Tolerance tol,
                          torch::ScalarType dtype, const std::string& where) {
  ASSERT_EQ(fast.size(), reference.size()) << where << ": fast and reference return different output counts";
  for (size_t i = 0; i < fast.size(); ++i) {
    EXPECT_EQ(fast[i].scalar_type(), dtype) << where << " output " << i;
    EXPECT_TRUE(all_close(fast[i], reference[i], tol.rtol, tol.atol)) << where << " output " << i;
  }
}

class KernelTable : public ::testing::TestWithParam<KernelCase> {};

// (a) Forward, no autograd (the inference paths), every grid shape, float32 and float64.
TEST_P(KernelTable, ForwardMatchesReference) {
  const KernelCase& row = GetParam();
  torch::NoGradGuard no_grad;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& shape : row.grid) {
      const std::string where = row.name + " " + shape.label() + " " + dtype_name(dtype);
      const KernelInputs in = inputs_for(row, shape, dtype);
      Tensors fast;
      {
        auto scope = enter_fast_scope(row, shape);
        fast = row.fast(in);
      }
      expect_outputs_close(row, fast, row.reference(in), forward_tolerance(row, dtype), dtype, where);
    }
  }
}

// Outputs and the gradients of sum_i <out_i, g_i> w.r.t. the row's grad inputs (zeros where an
// input does not reach the outputs).
struct WithGrads {
  Tensors outputs, grads;
};

WithGrads run_with_grads(const KernelCase& row, const KernelFn& fn, const KernelInputs& base, uint64_t seed) {
  KernelInputs in = base;
  Tensors leaves;
  for (size_t i : row.grad_inputs) {
    in.tensors[i] = base.tensors[i].detach().clone().requires_grad_(true);
    leaves.push_back(in.tensors[i]);
  }
  Tensors outputs = fn(in);
  torch::manual_seed(seed);
  Tensors upstream;
  // Drawn in logical (contiguous) order: randn_like would follow each output's strides, and fast
  // and reference outputs may be laid out differently.
  for (const auto& out : outputs) upstream.push_back(torch::randn(out.sizes(), out.options()));
  Tensors grads = torch::autograd::grad(outputs, leaves, upstream, /*retain_graph=*/false, /*create_graph=*/false,
                                        /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined()) grads[i] = torch::zeros_like(leaves[i]);
  for (auto& out : outputs) out = out.detach();
  return {outputs, grads};
}

// (b) Forward with autograd (the paths that save for backward) and every gradient, every grid
// shape, float32 and float64, the same upstream gradients for fast and reference.
TEST_P(KernelTable, BackwardMatchesReference) {
  const KernelCase& row = GetParam();
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& shape : row.grid) {
      const std::string where = row.name + " " + shape.label() + " " + dtype_name(dtype);
      const KernelInputs in = inputs_for(row, shape, dtype);
      const uint64_t seed = kernel_seed(row.name, shape.label() + "/upstream");
      WithGrads fast;
      {
        auto scope = enter_fast_scope(row, shape);
        fast = run_with_grads(row, row.fast, in, seed);
      }
      const WithGrads reference = run_with_grads(row, row.reference, in, seed);
      expect_outputs_close(row, fast.outputs, reference.outputs, forward_tolerance(row, dtype), dtype,
                           where + " (with autograd)");
      const Tolerance tol = backward_tolerance(row, dtype);
      for (size_t i = 0; i < row.grad_inputs.size(); ++i)
        EXPECT_TRUE(all_close(fast.grads[i], reference.grads[i], tol.rtol, tol.atol))
            << where << " gradient of " << row.input_names[row.grad_inputs[i]];
    }
  }
}

// (c) Finite differences in double on the smallest shape (contiguous inputs: gradcheck perturbs
// through view(-1)); every output, flattened and concatenated.
TEST_P(KernelTable, GradcheckInDouble) {
  const KernelCase& row = GetParam();
  const Shape& shape = row.gradcheck_shape;
  const KernelInputs in = inputs_for(row, shape, torch::kDouble);
  std::vector<torch::Tensor> args;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const bool grad = std::count(row.grad_inputs.begin(), row.grad_inputs.end(), i) > 0;
    args.push_back(in.tensors[i].detach().contiguous().requires_grad_(grad));
  }
  auto fn = [&](const std::vector<torch::Tensor>& tensors) {
    KernelInputs call = in;
    call.tensors = tensors;
    std::vector<torch::Tensor> flat;
    for (const auto& out : row.fast(call)) flat.push_back(out.reshape(-1));
    return torch::cat(flat);
  };
  auto scope = enter_fast_scope(row, shape);
  EXPECT_TRUE(gradcheck(fn, args, row.gradcheck)) << row.name << " " << shape.label();
}

INSTANTIATE_TEST_SUITE_P(Rows, KernelTable, ::testing::ValuesIn(kernel_table()),
                         [](const ::testing::TestParamInfo<KernelCase>& info) { return info.param.name; });

// A row per kernel: removing one fails here (add the kernel's name to kRequiredKernels with its row).
TEST(KernelTableContents, HasARowForEveryKernel) {
  std::set<std::string> covered;
  for (const auto& row : kernel_table()) covered.insert(row.kernel);
  for (const auto& kernel : kRequiredKernels) EXPECT_TRUE(covered.count(kernel)) << "no table row for " << kernel;
  for (const auto& kernel : covered)
    EXPECT_TRUE(std::count(kRequiredKernels.begin(), kRequiredKernels.end(), kernel))
        << "row kernel '" << kernel << "' is not in kRequiredKernels: list it there too";
}

// What every row must give, so that a new row cannot skip a check: a unique identifier name,
// functions, input names matching make_inputs, valid grad inputs, a grid with T = 1 and an odd
// T > 1 (in practice also T past a chunk or block boundary), a gradcheck shape, a bench shape,
// positive tolerances.
TEST(KernelTableContents, RowsAreWellFormed) {
  std::set<std::string> names;
  for (const auto& row : kernel_table()) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "duplicate row name";
    EXPECT_FALSE(row.name.empty());
    EXPECT_TRUE(std::all_of(row.name.begin(), row.name.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
    })) << "row names are [a-z0-9_]";
    EXPECT_FALSE(row.what.empty());
    ASSERT_TRUE(row.make_inputs && row.fast && row.reference);
    ASSERT_FALSE(row.grid.empty());
    ASSERT_FALSE(row.grad_inputs.empty());
    EXPECT_FALSE(row.bench_shapes.empty());
    bool t_one = false, t_odd = false;
    for (const auto& shape : row.grid) {
      t_one |= shape["T"] == 1;
      t_odd |= shape["T"] > 1 && shape["T"] % 2 == 1;
    }
    EXPECT_TRUE(t_one) << "the grid needs T = 1";
    EXPECT_TRUE(t_odd) << "the grid needs an odd T > 1";
    const KernelInputs in = inputs_for(row, row.gradcheck_shape, torch::kDouble);
    EXPECT_EQ(in.tensors.size(), row.input_names.size()) << "make_inputs vs input_names";
    for (size_t i : row.grad_inputs) {
      ASSERT_LT(i, in.tensors.size()) << "grad input index";
      EXPECT_TRUE(in.tensors[i].is_floating_point());
    }
    for (const Tolerance& t : {row.forward_f32, row.backward_f32, row.forward_f64, row.backward_f64})
      EXPECT_TRUE(t.rtol > 0 && t.atol > 0);
  }
}

}  // namespace
}  // namespace mixlab::testing
