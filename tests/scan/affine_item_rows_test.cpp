// The fused affine kernels' inputs per work item (issue 38 item 4): each item gathers its own rows
// and decay factors inside the parallel region. Gathered rows equal contiguous() bit for bit in
// every layout the layers pass (heads-first views, strided per-token gates) and in those that are
// not gathered (an inner stride, a broadcast width); decay factors taken range by range equal one
// exp() over the whole tensor bit for bit; and the fused forward and backward give bit-identical
// results from heads-first and from contiguous inputs, at one and two threads.
//
// Under test: src/scan/affine_item_rows.h / .cpp, and their use in src/scan/affine_fused.cpp
// (DiagItems, DeltaItems, the backwards' gathered upstream gradient).
#include "../../src/scan/affine_item_rows.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "mixlab/scan/affine.h"

namespace mixlab {
namespace affine_item_rows_test {
namespace {

using detail::ItemDecays;
using detail::ItemRows;

// Every item gathered, last first (the order must not matter).
at::Tensor gathered(const ItemRows& rows, int64_t items) {
  for (int64_t bh = items - 1; bh >= 0; --bh) rows.gather(bh);
  return rows.rows();
}

TEST(AffineItemRows, GatheredRowsEqualContiguousInEveryLayout) {
  torch::manual_seed(1);
  const int64_t B = 2, H = 3, T = 7, D = 5;
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    const auto o = torch::TensorOptions().dtype(dtype);
    const auto heads_first = torch::randn({B, T, H, D}, o).transpose(1, 2);                 // the layers' q, k, v
    const auto per_token = torch::randn({B, T, H}, o).permute({0, 2, 1});                   // a (B,H,T) gate
    const auto inner_stride = torch::randn({B, H, D, T}, o).transpose(2, 3);                // D values apart
    const auto broadcast = torch::randn({B, H, T, 1}, o).expand({B, H, T, D});              // stride 0 over D
    const auto offset = torch::randn({B, T + 2, H, D}, o).narrow(1, 2, T).transpose(1, 2);  // storage offset
    struct Layout {
      const char* name;
      at::Tensor x;
      bool gathers;
    };
    for (const auto& layout : {Layout{"heads-first", heads_first, true}, Layout{"per-token", per_token, true},
                               Layout{"inner stride", inner_stride, false}, Layout{"broadcast", broadcast, false},
                               Layout{"storage offset", offset, true}}) {
      const ItemRows rows(layout.x);
      EXPECT_EQ(rows.gathers(), layout.gathers) << layout.name;
      const auto got = gathered(rows, B * H);
      EXPECT_TRUE(got.is_contiguous()) << layout.name;
      EXPECT_TRUE(torch::equal(got, layout.x.contiguous())) << layout.name;
      EXPECT_EQ(rows.item_values(), T * (layout.x.dim() == 4 ? D : 1)) << layout.name;
    }
    // A contiguous input is read where it lies: no copy.
    const auto contiguous = torch::randn({B, H, T, D}, o);
    const ItemRows in_place(contiguous);
    EXPECT_FALSE(in_place.gathers());
    EXPECT_EQ(in_place.rows().data_ptr(), contiguous.data_ptr());
  }
}

TEST(AffineItemRows, DecayFactorsByRangesEqualOneExpBitForBit) {
  torch::manual_seed(2);
  const int64_t B = 2, H = 3, T = 37, Dk = 19;  // 37 19 values per item: a vector tail per range
  const auto o = torch::TensorOptions().dtype(torch::kFloat32);
  const std::vector<std::pair<const char*, at::Tensor>> gates{
      {"per key, contiguous", -torch::rand({B, H, T, Dk}, o) * 3},
      {"per key, heads-first", (-torch::rand({B, T, H, Dk}, o) * 3).transpose(1, 2)},
      {"scalar, contiguous", -torch::rand({B, H, T}, o) * 3},
      {"scalar, heads-first", (-torch::rand({B, T, H}, o) * 3).permute({0, 2, 1})},
      {"per key, inner stride", (-torch::rand({B, H, Dk, T}, o) * 3).transpose(2, 3)}};
  for (const auto& [name, g] : gates) {
    // With grad mode on and a leaf that requires grad, as a training forward's worker threads see it.
    const auto leaf = g.detach().clone(at::MemoryFormat::Preserve).requires_grad_(true);
    const ItemDecays decays(leaf);
    decays.fill(3, B * H);
    decays.fill(1, 3);
    decays.fill(0, 1);
    decays.fill(2, 2);  // an empty range changes nothing
    const auto want = g.exp();
    EXPECT_TRUE(torch::equal(decays.rows(), want)) << name;
    EXPECT_TRUE(decays.rows().is_contiguous()) << name;
    EXPECT_FALSE(decays.rows().requires_grad()) << name;
  }
}

// The fused results (outputs, final states and every gradient) from heads-first inputs against the
// same values made contiguous, bit for bit.
struct Inputs {
  at::Tensor q, k, v, gate, beta, init;
};

Inputs made_contiguous(const Inputs& in) {
  auto c = [](const at::Tensor& t) { return t.defined() ? t.contiguous() : t; };
  // A gate expanded over Dk stays expanded: that stride is what makes it a scalar gate.
  const bool expanded = in.gate.defined() && in.gate.dim() == 4 && in.gate.stride(3) == 0;
  return {c(in.q),    c(in.k),
          c(in.v),    expanded ? in.gate.narrow(3, 0, 1).contiguous().expand_as(in.gate) : c(in.gate),
          c(in.beta), c(in.init)};
}

// heads_first: the upstream gradient of the output arrives heads-first, as from a layer's output
// permute (the inputs' run); else contiguous with the same values (the reference run), so that
// the backward's gathered gradient is compared with one it did not gather.
std::vector<at::Tensor> run(const Inputs& in, bool delta, bool training, bool heads_first) {
  auto leaf = [&](const at::Tensor& t) {
    return t.defined() ? t.detach().clone(at::MemoryFormat::Preserve).requires_grad_(training) : t;
  };
  const bool expanded = !delta && in.gate.stride(3) == 0;
  auto q = leaf(in.q), k = leaf(in.k), v = leaf(in.v), init = leaf(in.init), beta = leaf(in.beta);
  auto g_leaf = leaf(expanded ? in.gate.narrow(3, 0, 1) : in.gate);
  auto g = expanded ? g_leaf.expand_as(in.gate) : g_leaf;
  std::optional<at::NoGradGuard> no_grad;
  if (!training) no_grad.emplace();
  const auto r = delta ? delta_rule_chunked(q, k, v, beta, g, init) : diag_decay_chunked(q, k, v, g, init);
  std::vector<at::Tensor> got{r.out.detach(), r.final_state.detach()};
  if (!training) return got;
  torch::manual_seed(9);
  const auto opts = r.out.options();
  auto w = torch::randn({r.out.size(0), r.out.size(2), r.out.size(1), r.out.size(3)}, opts).transpose(1, 2);
  if (!heads_first) w = w.contiguous();
  auto loss = (r.out * w).sum() + (r.final_state * torch::randn_like(r.final_state)).sum();
  std::vector<at::Tensor> leaves;
  for (const auto& t : {q, k, v, g_leaf, init, beta})
    if (t.defined()) leaves.push_back(t);
  for (const auto& grad : torch::autograd::grad({loss}, leaves)) got.push_back(grad);
  return got;
}

TEST(AffineItemRows, FusedResultsFromHeadsFirstInputsEqualContiguousInputsBitForBit) {
  const int threads = at::get_num_threads();
  // (B, H, T, Dk, Dv, dtype): many small items; a few long ones; one item (B H = 1) of one value
  // column; one head (H = 1: a heads-first view is then contiguous with odd strides); double.
  struct Size {
    int64_t B, H, T, Dk, Dv;
    at::ScalarType dtype;
  };
  uint64_t seed = 20;
  for (const auto& s : {Size{4, 8, 16, 8, 8, torch::kFloat}, Size{2, 12, 64, 32, 32, torch::kFloat},
                        Size{1, 3, 700, 64, 64, torch::kFloat}, Size{1, 1, 40, 16, 1, torch::kFloat},
                        Size{3, 1, 20, 4, 8, torch::kFloat}, Size{2, 3, 30, 8, 5, torch::kDouble}}) {
    const auto o = torch::TensorOptions().dtype(s.dtype);
    for (int kind = 0; kind < 4; ++kind) {  // 0 per-key gate, 1 scalar gate, 2 delta rule, 3 gated delta rule
      torch::manual_seed(seed++);
      const bool delta = kind >= 2;
      Inputs in;
      in.q = torch::randn({s.B, s.T, s.H, s.Dk}, o).transpose(1, 2);
      auto k = torch::randn({s.B, s.T, s.H, s.Dk}, o);
      in.k = (delta ? k / k.norm(2, -1, true) : k / std::sqrt(double(s.Dk))).transpose(1, 2);
      in.v = torch::randn({s.B, s.T, s.H, s.Dv}, o).transpose(1, 2);
      in.init = torch::randn({s.B, s.H, s.Dk, s.Dv}, o);
      if (kind == 0) in.gate = (-0.3 * torch::rand({s.B, s.T, s.H, s.Dk}, o)).transpose(1, 2);
      if (kind == 1) in.gate = (-0.3 * torch::rand({s.B, s.T, s.H, 1}, o)).transpose(1, 2).expand({-1, -1, -1, s.Dk});
      if (delta) in.beta = (2 * torch::rand({s.B, s.T, s.H}, o)).permute({0, 2, 1});
      if (kind == 3) in.gate = (-0.3 * torch::rand({s.B, s.T, s.H}, o)).permute({0, 2, 1});
      const Inputs contiguous = made_contiguous(in);
      for (int n : {1, 2}) {
        at::set_num_threads(n);
        for (bool training : {false, true}) {
          const auto got = run(in, delta, training, true), want = run(contiguous, delta, training, false);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            if (!want[i].defined()) continue;
            EXPECT_TRUE(torch::equal(got[i], want[i])) << "kind " << kind << ", T " << s.T << ", " << n
                                                       << " thread(s), training " << training << ", tensor " << i;
          }
        }
      }
      at::set_num_threads(threads);
    }
  }
}

}  // namespace
}  // namespace affine_item_rows_test
}  // namespace mixlab
