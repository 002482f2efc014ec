// The two affine kernels in four forms: chunked = recurrent = scan form = plain loop reference,
// forward and backward, across lengths, chunk sizes and gate strengths; prefill in pieces;
// gradcheck in double; argument errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "mixlab/core/error.h"
#include "mixlab/scan/affine.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixlab {
namespace affine_kernel_test {
namespace {

using testing::all_close;

// Inputs for one case; q,k,v,g are non-contiguous (made as (B,T,H,D) then transposed).
struct Inputs {
  at::Tensor q, k, v, gate, beta, init;
};

// gate kinds for the diagonal kernel: 0 none (linear attention), 1 one scalar per (b,h,t)
// expanded over Dk (RetNet/mLSTM/gated RFA), 2 per key (GLA/Mamba). `strength` scales -log decay:
// 0.01 gives decays near 1, 30 decays near 0.
Inputs make_diag(int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv, int kind, double strength, uint64_t seed,
                 at::ScalarType dtype = torch::kFloat64) {
  torch::manual_seed(seed);
  auto o = torch::TensorOptions().dtype(dtype);
  Inputs in;
  in.q = torch::randn({B, T, H, Dk}, o).transpose(1, 2);
  in.k = (torch::randn({B, T, H, Dk}, o) / std::sqrt(double(Dk))).transpose(1, 2);
  in.v = torch::randn({B, T, H, Dv}, o).transpose(1, 2);
  if (kind == 0) {
    in.gate = torch::zeros({B, H, T, Dk}, o);
  } else if (kind == 1) {
    in.gate = (-strength * torch::rand({B, H, T, 1}, o)).expand({B, H, T, Dk});
  } else {
    in.gate = (-strength * torch::rand({B, T, H, Dk}, o)).transpose(1, 2);
  }
  in.init = torch::randn({B, H, Dk, Dv}, o);
  return in;
}

Inputs make_delta(int64_t B, int64_t H, int64_t T, int64_t Dk, int64_t Dv, bool gated, double strength, uint64_t seed,
                  at::ScalarType dtype = torch::kFloat64) {
  torch::manual_seed(seed);
  auto o = torch::TensorOptions().dtype(dtype);
  Inputs in;
  in.q = torch::randn({B, T, H, Dk}, o).transpose(1, 2);
  in.k = torch::nn::functional::normalize(torch::randn({B, T, H, Dk}, o),
                                          torch::nn::functional::NormalizeFuncOptions().dim(-1))
             .transpose(1, 2);
  in.v = torch::randn({B, T, H, Dv}, o).transpose(1, 2);
  in.beta = torch::rand({B, H, T}, o);
  if (gated) in.gate = -strength * torch::rand({B, H, T}, o);
  in.init = torch::randn({B, H, Dk, Dv}, o);
  return in;
}

using DiagFn = std::function<AffineResult(const Inputs&)>;

// Output, final state and the gradients of a fixed random projection of both w.r.t. q,k,v,gate,
// (beta,) init.
struct Run {
  at::Tensor out, final_state;
  std::vector<at::Tensor> grads;
};

Run run_with_grads(const Inputs& base, const std::function<AffineResult(const Inputs&)>& fn) {
  Inputs in;
  std::vector<at::Tensor> leaves;
  auto leaf = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    auto l = t.detach().clone().requires_grad_(true);
    leaves.push_back(l);
    // Keep the caller's layout (non-contiguity) through an identity view of the leaf.
    return l;
  };
  in.q = leaf(base.q);
  in.k = leaf(base.k);
  in.v = leaf(base.v);
  if (base.gate.defined() && base.gate.dim() == 4 && base.gate.stride(3) == 0) {
    // A scalar gate expanded over Dk (the fast path of the chunked form): the leaf is (B,H,T,1).
    in.gate = leaf(base.gate.narrow(3, 0, 1)).expand_as(base.gate);
  } else {
    in.gate = leaf(base.gate);
  }
  in.beta = leaf(base.beta);
  in.init = leaf(base.init);
  // Restore non-contiguous strides for q,k,v: clone() keeps strides of a dense tensor.
  auto r = fn(in);
  torch::manual_seed(77);
  auto wo = torch::randn_like(r.out), wf = torch::randn_like(r.final_state);
  auto loss = (r.out * wo).sum() + (r.final_state * wf).sum();
  auto grads = torch::autograd::grad({loss}, leaves);
  return {r.out.detach(), r.final_state.detach(), grads};
}

void expect_same(const Run& a, const Run& b, const std::string& what, double tol) {
  EXPECT_TRUE(all_close(a.out, b.out, tol, tol)) << what << " out";
  EXPECT_TRUE(all_close(a.final_state, b.final_state, tol, tol)) << what << " final state";
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_TRUE(all_close(a.grads[i], b.grads[i], tol, tol)) << what << " grad " << i;
}

TEST(DiagDecay, AllFormsAgreeForwardAndBackward) {
  int64_t seed = 0;
  for (int64_t T : {1, 17, 63, 64, 257}) {
    for (int kind : {0, 1, 2}) {
      for (double strength : {0.01, 1.0, 30.0}) {
        if (kind == 0 && strength != 1.0) continue;
        const std::string what =
            "T=" + std::to_string(T) + " kind=" + std::to_string(kind) + " strength=" + std::to_string(strength);
        auto in = make_diag(2, 2, T, 4, 3, kind, strength, static_cast<uint64_t>(++seed));
        auto ref =
            run_with_grads(in, [](const Inputs& x) { return diag_decay_reference(x.q, x.k, x.v, x.gate, x.init); });
        auto rec =
            run_with_grads(in, [](const Inputs& x) { return diag_decay_recurrent(x.q, x.k, x.v, x.gate, x.init); });
        expect_same(rec, ref, what + " recurrent", 1e-9);
        if (T <= 64) {  // the scan form costs Dk^2 Dv per Agg call; long T adds nothing here
          auto scan =
              run_with_grads(in, [](const Inputs& x) { return diag_decay_scan_form(x.q, x.k, x.v, x.gate, x.init); });
          expect_same(scan, ref, what + " scan", 1e-9);
        }
        for (int64_t chunk : {1, 16, 64}) {
          auto ch = run_with_grads(
              in, [chunk](const Inputs& x) { return diag_decay_chunked(x.q, x.k, x.v, x.gate, x.init, chunk); });
          expect_same(ch, ref, what + " chunk=" + std::to_string(chunk), 1e-9);
        }
      }
    }
  }
}

TEST(DiagDecay, ScanFormLongSequence) {
  auto in = make_diag(1, 2, 257, 3, 2, 2, 1.0, 99);
  auto ref = run_with_grads(in, [](const Inputs& x) { return diag_decay_recurrent(x.q, x.k, x.v, x.gate, x.init); });
  auto scan = run_with_grads(in, [](const Inputs& x) { return diag_decay_scan_form(x.q, x.k, x.v, x.gate, x.init); });
  expect_same(scan, ref, "scan T=257", 1e-9);
}

TEST(DiagDecay, Float32AndNoInitialState) {
  auto in = make_diag(2, 3, 100, 8, 5, 2, 2.0, 5, torch::kFloat32);
  auto ref = diag_decay_recurrent(in.q, in.k, in.v, in.gate);
  auto ch = diag_decay_chunked(in.q, in.k, in.v, in.gate, {}, 32);
  EXPECT_TRUE(all_close(ch.out, ref.out, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(ch.final_state, ref.final_state, 1e-4, 1e-4));
  EXPECT_EQ(ch.out.scalar_type(), torch::kFloat32);
}

TEST(DiagDecay, ExtremeDecayStaysFinite) {
  // log decay -80 per step: exp(-b) would overflow over a chunk of 64 if not factorised per pair.
  auto in = make_diag(1, 1, 130, 4, 4, 2, 80.0, 6, torch::kFloat32);
  auto ch = diag_decay_chunked(in.q, in.k, in.v, in.gate, in.init, 64);
  auto ref = diag_decay_recurrent(in.q, in.k, in.v, in.gate, in.init);
  EXPECT_TRUE(torch::isfinite(ch.out).all().item<bool>());
  EXPECT_TRUE(all_close(ch.out, ref.out, 1e-4, 1e-4));
}

// Float32 accuracy under strong decay must not grow with the chunk (issue 10 item 3): the
// chunked form's error against a float64 reference stays within a small multiple of the float32
// recurrent form's (FlashAttention's rule: bound a fast kernel by the naive same-precision
// error). Before the log decays were cumulated in double, chunk 64 was ~100x the recurrent error.
TEST(DiagDecay, Float32ErrorIndependentOfChunkUnderStrongDecay) {
  for (int kind : {1, 2}) {
    auto in64 = make_diag(2, 2, 256, 16, 8, kind, 8.0, 11, torch::kFloat64);
    auto exact = diag_decay_recurrent(in64.q, in64.k, in64.v, in64.gate, in64.init).out;
    auto f = [](const at::Tensor& t) { return t.to(torch::kFloat32); };
    // Same values in float32, same layout (kind 1 keeps its stride-0 gate: the scalar path).
    auto gate32 = kind == 1 ? f(in64.gate.narrow(3, 0, 1)).expand_as(in64.gate) : f(in64.gate);
    auto err = [&](const at::Tensor& out) { return (out.to(torch::kFloat64) - exact).abs().max().item<double>(); };
    const double rec = err(diag_decay_recurrent(f(in64.q), f(in64.k), f(in64.v), gate32, f(in64.init)).out);
    for (int64_t chunk : {8, 64, 128}) {
      const double ch = err(diag_decay_chunked(f(in64.q), f(in64.k), f(in64.v), gate32, f(in64.init), chunk).out);
      EXPECT_LE(ch, 4 * rec + 1e-6) << "kind " << kind << " chunk " << chunk << ": chunked " << ch << ", recurrent "
                                    << rec;
    }
  }
}

TEST(DiagDecay, PrefillInPiecesEqualsOneForward) {
  auto in = make_diag(2, 2, 77, 4, 3, 2, 1.0, 7);
  auto whole =
      run_with_grads(in, [](const Inputs& x) { return diag_decay_chunked(x.q, x.k, x.v, x.gate, x.init, 16); });
  auto pieces = run_with_grads(in, [](const Inputs& x) {
    at::Tensor state = x.init;
    std::vector<at::Tensor> outs;
    int64_t start = 0;
    for (int64_t len : {5, 30, 1, 41}) {
      auto r = diag_decay_chunked(x.q.narrow(2, start, len), x.k.narrow(2, start, len), x.v.narrow(2, start, len),
                                  x.gate.narrow(2, start, len), state, 8);
      outs.push_back(r.out);
      state = r.final_state;
      start += len;
    }
    return AffineResult{torch::cat(outs, 2), state};
  });
  expect_same(pieces, whole, "pieces", 1e-9);
}

TEST(DiagDecay, StepEqualsForwardRowByRow) {
  auto in = make_diag(2, 2, 20, 4, 3, 2, 1.0, 8);
  auto full = diag_decay_chunked(in.q, in.k, in.v, in.gate, in.init, 8);
  at::Tensor state = in.init;
  for (int64_t t = 0; t < 20; ++t) {
    auto st = diag_decay_step(state, in.q.select(2, t), in.k.select(2, t), in.v.select(2, t), in.gate.select(2, t));
    ASSERT_TRUE(all_close(st.out, full.out.select(2, t), 1e-10, 1e-10)) << t;
    state = st.state;
  }
  EXPECT_TRUE(all_close(state, full.final_state, 1e-10, 1e-10));
}

// Dk x Dv 3 x 2, and 4 x 2 and 2 x 6: in double, whole half and quarter vectors under AVX-512
// (the fused kernels' narrower tiers) and 16-byte ones elsewhere.
TEST(DiagDecay, Gradcheck) {
  for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {4, 2}, {2, 6}})
    for (int kind : {1, 2}) {
      auto in = make_diag(1, 2, 5, Dk, Dv, kind, 0.7, 10 + kind);
      auto gate = in.gate.contiguous();
      std::vector<at::Tensor> xs{in.q.contiguous().requires_grad_(true), in.k.contiguous().requires_grad_(true),
                                 in.v.contiguous().requires_grad_(true), gate.requires_grad_(true),
                                 in.init.requires_grad_(true)};
      auto fn = [](const std::vector<at::Tensor>& x) {
        auto r = diag_decay_chunked(x[0], x[1], x[2], x[3], x[4], 2);
        return torch::cat({r.out.flatten(), r.final_state.flatten()});
      };
      EXPECT_TRUE(testing::gradcheck(fn, xs)) << "Dk=" << Dk << " Dv=" << Dv << " kind=" << kind;
    }
}

TEST(DeltaRule, AllFormsAgreeForwardAndBackward) {
  int64_t seed = 100;
  for (int64_t T : {1, 17, 63, 64, 257}) {
    for (bool gated : {false, true}) {
      for (double strength : {0.01, 1.0, 30.0}) {
        if (!gated && strength != 1.0) continue;
        const std::string what =
            "T=" + std::to_string(T) + " gated=" + std::to_string(gated) + " strength=" + std::to_string(strength);
        auto in = make_delta(2, 2, T, 4, 3, gated, strength, static_cast<uint64_t>(++seed));
        auto ref = run_with_grads(
            in, [](const Inputs& x) { return delta_rule_reference(x.q, x.k, x.v, x.beta, x.gate, x.init); });
        auto rec = run_with_grads(
            in, [](const Inputs& x) { return delta_rule_recurrent(x.q, x.k, x.v, x.beta, x.gate, x.init); });
        expect_same(rec, ref, what + " recurrent", 1e-9);
        if (T <= 64) {
          auto scan = run_with_grads(
              in, [](const Inputs& x) { return delta_rule_scan_form(x.q, x.k, x.v, x.beta, x.gate, x.init); });
          expect_same(scan, ref, what + " scan", 1e-9);
        }
        for (int64_t chunk : {1, 16, 64, 24}) {
          auto ch = run_with_grads(in, [chunk](const Inputs& x) {
            return delta_rule_chunked(x.q, x.k, x.v, x.beta, x.gate, x.init, chunk);
          });
          expect_same(ch, ref, what + " chunk=" + std::to_string(chunk), 1e-8);
        }
      }
    }
  }
}

TEST(DeltaRule, PrefillInPiecesAndStep) {
  auto in = make_delta(2, 2, 50, 4, 3, true, 1.0, 7);
  auto whole = delta_rule_chunked(in.q, in.k, in.v, in.beta, in.gate, in.init, 16);
  at::Tensor state = in.init;
  std::vector<at::Tensor> outs;
  int64_t start = 0;
  for (int64_t len : {3, 20, 27}) {
    auto r = delta_rule_chunked(in.q.narrow(2, start, len), in.k.narrow(2, start, len), in.v.narrow(2, start, len),
                                in.beta.narrow(2, start, len), in.gate.narrow(2, start, len), state, 8);
    outs.push_back(r.out);
    state = r.final_state;
    start += len;
  }
  EXPECT_TRUE(all_close(torch::cat(outs, 2), whole.out, 1e-9, 1e-9));
  EXPECT_TRUE(all_close(state, whole.final_state, 1e-9, 1e-9));
  state = in.init;
  for (int64_t t = 0; t < 50; ++t) {
    auto st = delta_rule_step(state, in.q.select(2, t), in.k.select(2, t), in.v.select(2, t), in.beta.select(2, t),
                              in.gate.select(2, t));
    ASSERT_TRUE(all_close(st.out, whole.out.select(2, t), 1e-9, 1e-9)) << t;
    state = st.state;
  }
}

TEST(DeltaRule, Gradcheck) {
  for (auto [Dk, Dv] : std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {4, 2}, {2, 6}})
    for (bool gated : {false, true}) {
      auto in = make_delta(1, 2, 5, Dk, Dv, gated, 0.5, 20);
      std::vector<at::Tensor> xs{in.q.contiguous().requires_grad_(true), in.k.contiguous().requires_grad_(true),
                                 in.v.contiguous().requires_grad_(true), in.beta.requires_grad_(true),
                                 in.init.requires_grad_(true)};
      if (gated) xs.push_back(in.gate.requires_grad_(true));
      auto fn = [gated](const std::vector<at::Tensor>& x) {
        auto r = delta_rule_chunked(x[0], x[1], x[2], x[3], gated ? x[5] : at::Tensor(), x[4], 2);
        return torch::cat({r.out.flatten(), r.final_state.flatten()});
      };
      EXPECT_TRUE(testing::gradcheck(fn, xs)) << "Dk=" << Dk << " Dv=" << Dv << (gated ? " gated" : "");
    }
}

TEST(AffineKernels, BadInputs) {
  auto in = make_diag(2, 2, 9, 4, 3, 2, 1.0, 1);
  expect_error([&] { diag_decay_chunked(in.q, in.k.narrow(2, 0, 8), in.v, in.gate); },
               "diag_decay_chunked: k must have shape (B,H,T,Dk) = [2,2,9,4], got [2,2,8,4]");
  expect_error([&] { diag_decay_chunked(in.q, in.k, in.v, -in.gate + 0.1); },
               "g (log decay, decay = exp(g) in (0,1]) must lie in");
  expect_error([&] { diag_decay_recurrent(in.q, in.k, in.v, in.gate * NAN); },
               "g (log decay, decay = exp(g) in (0,1]) must be finite");
  // A scalar gate expanded over Dk (stride 0) is checked on one slice: a bad token still fails,
  // a good expanded gate passes.
  auto scalar = -torch::rand({2, 2, 9, 1}, torch::kFloat64);
  EXPECT_NO_THROW(diag_decay_chunked(in.q, in.k, in.v, scalar.expand({2, 2, 9, 4})));
  auto bad = scalar.clone();
  bad[1][0][7][0] = 0.25;
  expect_error(
      [&] {
        diag_decay_chunked(in.q, in.k, in.v, bad.expand({2, 2, 9, 4}));
      },
      "must lie in [-1e+30, 0], got values in [");
  bad[1][0][7][0] = INFINITY * -1.0;
  expect_error([&] { diag_decay_chunked(in.q, in.k, in.v, bad.expand({2, 2, 9, 4})); }, "must be finite");
  expect_error([&] { diag_decay_chunked(in.q, in.k, in.v, in.gate, {}, 3); }, "chunk must be a power of two");
  expect_error(
      [&] {
        diag_decay_chunked(in.q, in.k, in.v, in.gate, torch::zeros({2, 2, 3, 3}, torch::kFloat64));
      },
      "initial_state must have shape (B,H,Dk,Dv) = [2,2,4,3], got [2,2,3,3]");
  expect_error(
      [&] {
        diag_decay_chunked(in.q, in.k, in.v, in.gate, torch::zeros({2, 2, 4, 3}, torch::kFloat32));
      },
      "initial_state must have the dtype of q");
  expect_error([&] { diag_decay_scan_form(in.q, in.k, in.v.to(torch::kFloat32), in.gate); },
               "v must have the dtype of q");
  expect_error([&] { diag_decay_reference(in.q.select(0, 0), in.k, in.v, in.gate); },
               "q must have 4 dimensions (B,H,T,Dk)");
  expect_error([&] { diag_decay_chunked(in.q.to(torch::kInt64), in.k, in.v, in.gate); },
               "q must be float32 or float64");
  auto s = torch::zeros({2, 2, 4, 3}, torch::kFloat64);
  auto q1 = in.q.select(2, 0), k1 = in.k.select(2, 0), v1 = in.v.select(2, 0), g1 = in.gate.select(2, 0);
  expect_error([&] { diag_decay_step(s.to(torch::kFloat32), q1, k1, v1, g1); },
               "diag_decay_step: state must have the dtype of q_t");
  expect_error([&] { diag_decay_step(s.narrow(3, 0, 2), q1, k1, v1, g1); },
               "state must have shape (B,H,Dk,Dv) = [2,2,4,3], got [2,2,4,2]");
  expect_error([&] { diag_decay_step(s, q1, k1, v1, g1.abs() + 1); }, "g_t (log decay");

  auto dl = make_delta(2, 2, 9, 4, 3, true, 1.0, 2);
  expect_error([&] { delta_rule_chunked(dl.q, dl.k, dl.v, dl.beta + 2.5, dl.gate); },
               "beta (delta-rule write strength) must lie in [0, 2]");
  expect_error([&] { delta_rule_chunked(dl.q, dl.k, dl.v, dl.beta, -dl.gate + 0.1); },
               "log_alpha (log decay, alpha = exp(log_alpha) in (0,1]) must lie in");
  expect_error([&] { delta_rule_recurrent(dl.q, dl.k, dl.v, dl.beta.narrow(2, 0, 3), dl.gate); },
               "delta_rule_recurrent: beta must have shape (B,H,T) = [2,2,9], got [2,2,3]");
  expect_error([&] { delta_rule_chunked(dl.q, dl.k, dl.v, dl.beta, dl.gate, {}, 0); }, "chunk must be >= 1");
  expect_error([&] { delta_rule_step(s, q1, k1, v1, dl.beta.select(2, 0), dl.gate.select(2, 0) + 5); }, "log_alpha_t");
  expect_error([&] { delta_rule_step(s.narrow(2, 0, 1), q1, k1, v1, dl.beta.select(2, 0)); },
               "delta_rule_step: state must have shape");
}

TEST(AffineKernels, NoTimeByTimeTensor) {
  // T = 2^16: a (T,T) float tensor would need 16 GiB, so these forwards only pass if the chunked
  // forms keep their promise of O(T C + T D^2 / C) memory.
  torch::NoGradGuard no_grad;
  const int64_t T = int64_t{1} << 16;
  auto q = torch::randn({1, 1, T, 2}), k = torch::randn({1, 1, T, 2}) / 4, v = torch::randn({1, 1, T, 2});
  auto g = -torch::rand({1, 1, T, 2});
  auto r = diag_decay_chunked(q, k, v, g, {}, 64);
  EXPECT_EQ(r.out.size(2), T);
  EXPECT_TRUE(torch::isfinite(r.out).all().item<bool>());
  auto kn = k / k.norm(2, -1, true);
  auto d = delta_rule_chunked(q, kn, v, torch::rand({1, 1, T}), -torch::rand({1, 1, T}), {}, 64);
  EXPECT_TRUE(torch::isfinite(d.out).all().item<bool>());
}

TEST(AffineKernels, AggregatorIsAssociativeAndHasIdentity) {
  torch::manual_seed(3);
  auto mk = [](bool dense) {
    AffineElement x;
    x.dense = dense;
    x.e = dense ? torch::randn({2, 3, 4, 4}, torch::kFloat64) : torch::rand({2, 3, 4}, torch::kFloat64);
    x.f = torch::randn({2, 3, 4, 5}, torch::kFloat64);
    return x;
  };
  for (bool dense : {false, true}) {
    auto a = mk(dense), b = mk(!dense), c = mk(dense);
    auto l = affine_combine(affine_combine(a, b), c), r = affine_combine(a, affine_combine(b, c));
    EXPECT_TRUE(all_close(l.f, r.f, 1e-12, 1e-12));
    auto ident = affine_combine(affine_identity(a), a);
    EXPECT_TRUE(torch::equal(ident.f, a.f));
  }
}

}  // namespace
}  // namespace affine_kernel_test
}  // namespace mixlab
