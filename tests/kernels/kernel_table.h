// tests/kernels/kernel_table.h — the one table of mixlab's native kernels (issue 36 item 5), in
// the spirit of llama.cpp's test-backend-ops: one row per fast path, naming the fast function,
// its reference, the inputs it is run on, the shapes, which inputs get gradients and the
// tolerances. Two programs read it:
//   tests/kernels/kernel_table_test.cpp (test_kernels): for every row, (a) forward parity fast vs
//     reference on every shape of the grid in float32 and float64 (both sides in the dtype under
//     test, on the same inputs, without autograd: the inference paths), (b) backward parity (the
//     gradients of every grad input under the same random upstream gradients, outputs compared
//     again on the with-gradient path), (c) a finite-difference gradcheck in double of the fast
//     path on the row's smallest shape (tests/support/gradcheck.h), plus a check that the
//     table still has a row for every kernel it promises (kRequiredKernels) and that each row is
//     well formed (awkward T in the grid, valid gradient indices, ...);
//   bench/kernels_bench.cpp (bench_kernels): for every row and bench shape, BM_<name>/fast/... and
//     BM_<name>/reference/..., forward and forward+backward, in float32, with a closing table of
//     reference / fast time ratios measured in the same run.
//
// What it is not: a replacement for the per-area tests (tests/resolvent/, tests/scan/,
// tests/toeplitz/, tests/attention/, tests/brl/). Those stay: they run every instruction-set
// build (MIXLAB_CPU_ISA), strided and expanded layouts beyond the ones drawn here, chunked
// prefill and decode, special cases, error messages, extreme decays, thread counts. This table
// runs each row once, on the instruction set the CPU picks, and holds every kernel to the same
// three checks, so that a kernel cannot lack one of them.
//
// Adding a row (a new kernel, or a second fast path of one, e.g. under a guard):
//   1. write `KernelCase my_kernel_row()` in kernel_table.cpp: make_inputs draws the inputs in the
//      ranges the kernel expects (copy them from the kernel's own tests) from a Shape, a dtype and
//      a seed; fast and reference map KernelInputs to the same list of outputs; list the grad
//      inputs; grid with T = 1, an odd T and a T that is not a multiple of the kernel's
//      chunk/block sizes, B = 1 and 2, an odd H; a tiny gradcheck shape; one or two bench
//      shapes; tolerances taken from the kernel's own tests for the same comparison;
//   2. append it to kernel_table();
//   3. add its `kernel` name to kRequiredKernels (so that removing the row later fails a test).
// Nothing else: the test and the benchmark pick the row up.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/gradcheck.h"

namespace mixlab::testing {

using Tensors = std::vector<torch::Tensor>;

/// Named sizes, written as in the headers' shape letters: Shape("B2 H3 T33 D16"); names are
/// letters (case-sensitive, several allowed: "Dk5 Dv3"), each followed by a non-negative integer.
class Shape {
 public:
  Shape() = default;
  Shape(const char* spec);  // NOLINT(google-explicit-constructor): rows are written as strings
  Shape(const std::string& spec);

  /// The size named `name`; throws std::out_of_range naming it when the shape has none.
  int64_t operator[](const std::string& name) const;
  bool has(const std::string& name) const;
  /// "B2_H3_T33_D16": usable in test and benchmark names.
  std::string label() const;
  const std::vector<std::pair<std::string, int64_t>>& sizes() const { return sizes_; }

 private:
  std::vector<std::pair<std::string, int64_t>> sizes_;
};

/// What the fast and reference functions of a row read.
struct KernelInputs {
  Tensors tensors;  // one per KernelCase::input_names, in that order
  Shape shape;      // the shape they were drawn for (sizes not visible in the tensors: windows...)
  /// Parameters the op reads besides its tensors, shared by fast and reference (BRL's mixer);
  /// null for plain ops.
  std::shared_ptr<torch::nn::Module> module;
};

using KernelFn = std::function<Tensors(const KernelInputs&)>;
/// Inputs for a shape in a dtype (float32 or float64); deterministic in `seed`.
using MakeInputs = std::function<KernelInputs(const Shape&, torch::ScalarType dtype, uint64_t seed)>;
/// Made before the fast function runs on a shape and held until its gradients are taken (a guard
/// or a tuning scope that picks the path); null = nothing to hold.
using ScopeFactory = std::function<std::shared_ptr<void>(const Shape&)>;

struct Tolerance {
  double rtol = 0, atol = 0;  // all_close: |fast - reference| <= atol + rtol |reference|
};

struct KernelCase {
  std::string name;    // the row: test and benchmark names, [a-z0-9_]
  std::string kernel;  // the native kernel it covers (several rows may share one), see kRequiredKernels
  std::string what;    // one line: which fast path against which reference
  std::vector<std::string> input_names;
  std::vector<size_t> grad_inputs;  // indices into input_names whose gradients are compared and checked
  MakeInputs make_inputs;
  KernelFn fast, reference;         // KernelInputs -> outputs, the same number; every output differentiable
  ScopeFactory fast_scope;          // optional
  std::vector<Shape> grid;          // parity shapes (float32 and float64)
  Shape gradcheck_shape;            // float64 finite differences: two fast calls per element of every grad input
  std::vector<Shape> bench_shapes;  // float32
  Tolerance forward_f32, backward_f32, forward_f64, backward_f64;
  GradcheckOptions gradcheck;
};

/// Every row, in a fixed order (built once).
const std::vector<KernelCase>& kernel_table();

/// The kernels the table must cover: kernel_table_test fails when one has no row.
extern const std::vector<std::string> kRequiredKernels;

/// The row's fast_scope for `shape`, entered (null when it has none): hold it over the fast
/// forward and its backward.
std::shared_ptr<void> enter_fast_scope(const KernelCase& row, const Shape& shape);

/// Seed of a (row, shape) pair: stable across runs and platforms (FNV-1a of the names).
uint64_t kernel_seed(const std::string& row, const std::string& shape_label);

}  // namespace mixlab::testing
