// The fused selective scan (mixlab/scan/selective_scan.h): forward, the backward's driver (its
// block kernel is selective_scan_kernels.inc, built per instruction set), decode step, and the
// plain reference.
//
// The forward's loop order: one batch row at a time, t outermost, then the state index n, then channels c
// innermost (the vector lanes). b_t[n] and c_t[n] are scalars of the channel loop, u_t, Δ_t and
// the rows of a^T are contiguous over c, and the N·C state lives in one small buffer (4 KiB at
// C = 64, N = 16 in float32).
#include "mixlab/scan/selective_scan.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/core/thread_scratch.h"
#include "scan_exp.h"
#include "selective_scan_kernels.h"

namespace mixlab {
namespace {

using detail::selective_scan::kScanChunk;
using detail::selective_scan::scan_exp;
using detail::selective_scan::ScanBackwardBlock;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ScanDims {
  int64_t B = 0, T = 0, C = 0, N = 0;
};

// Channels per parallel work item in the forward pass (a batch row alone is too coarse at B = 1).
constexpr int64_t kChannelBlock = 16;
// Channels per backward work item: 2·kScanChunk·N·kBackwardChannels values of recomputed states
// (512 KiB in float32 at N = 16, within this CPU's 1 MiB L2) stay in L2 while t walks down the
// chunk. 64 against 32: fwd+bwd 1.05-1.33x (fewer sums across lanes per (t, n); chunks of 32
// steps were no faster; docs/log/benchmarks-2026-11.md, "The selective scan's backward blocks").
constexpr int64_t kBackwardChannels = 64;

// The backward's block width: kBackwardChannels, narrower while a short batch (B = 1) would leave
// threads without a block.
int64_t backward_width(const ScanDims& s) {
  int64_t w = std::min(s.C, kBackwardChannels);
  while (w > kChannelBlock && s.B * ((s.C + w - 1) / w) < at::get_num_threads()) w = (w + 1) / 2;
  return w;
}

// Checkpoints kept per row: the state entering chunks 1 .. chunks−1 (slot 0 is unused: chunk 0
// starts from h0).
int64_t checkpoint_chunks(int64_t T) { return (T + kScanChunk - 1) / kScanChunk; }

ScanDims check_scan(const char* fn, const Tensor& u, const Tensor& delta, const Tensor& a, const Tensor& b,
                    const Tensor& c, const Tensor& d, const Tensor& h0) {
  check_dim(fn, "u", u, 3, "(B,T,C)");
  check_floating(fn, "u", u);
  check_cpu(fn, "u", u);
  check_dim(fn, "a", a, 2, "(C,N)");
  ScanDims s{u.size(0), u.size(1), u.size(2), a.size(1)};
  MIXLAB_CHECK(s.T >= 1, "{}: u must have T >= 1 (B,T,C), got shape {}", fn, shape_string(u));
  MIXLAB_CHECK(s.N >= 1, "{}: a must have N >= 1 (C,N), got shape {}", fn, shape_string(a));
  const std::vector<std::pair<const char*, const Tensor*>> rest = {
      {"delta", &delta}, {"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}};
  for (const auto& [name, t] : rest) {
    check_defined(fn, name, *t);
    check_cpu(fn, name, *t);
    check_same_dtype(fn, name, *t, "u", u);
  }
  check_shape(fn, "delta", delta, {s.B, s.T, s.C}, "(B,T,C)");
  check_shape(fn, "a", a, {s.C, s.N}, "(C,N)");
  check_shape(fn, "b", b, {s.B, s.T, s.N}, "(B,T,N)");
  check_shape(fn, "c", c, {s.B, s.T, s.N}, "(B,T,N)");
  check_shape(fn, "d", d, {s.C}, "(C)");
  if (h0.defined()) {
    check_cpu(fn, "h0", h0);
    check_same_dtype(fn, "h0", h0, "u", u);
    check_shape(fn, "h0", h0, {s.B, s.C, s.N}, "(B,C,N)");
    MIXLAB_CHECK(!(torch::GradMode::is_enabled() && h0.requires_grad()),
                 "{}: h0 is a constant (no gradient flows to it); detach it or run under NoGradGuard", fn);
  }
  return s;
}

// The row kernels are compiled three times, for x86-64-v4 (AVX-512: 16 float lanes), x86-64-v3
// (AVX2 + FMA: 8 lanes, fused multiply-adds; `arch=haswell` would be chosen by CPU model, not by
// features, and missed on newer server CPUs) and for the build's baseline; the loader picks one
// per machine (GCC target_clones, an ifunc).
// A step and the scan call the same clone, so decode still equals the forward bitwise.
// Sanitizer builds (which check correctness, not speed) keep one version: an ifunc resolver runs
// during relocation, before the sanitizer runtime is up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define MIXLAB_SCAN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MIXLAB_SCAN_CLONES
#endif

// Layout: the loops over channels are the innermost ones, so every vector lane is one channel
// and nothing is summed across lanes in the forward pass. `at` is a transposed, (N,C); the state
// buffer is (N, width).
//
// Forward over one batch row, channels [c0, c1). Pointers are at the row's start: u, dl (T,C);
// bm, cm (T,N); h0, h_final (C,N) or null. With ckpt non-null ((chunks, N, C), chunks =
// checkpoint_chunks(T)) it records the state entering every chunk of kScanChunk steps after the
// first (chunk 0 starts from h0), which is all the backward pass keeps of the states.
template <typename S>
MIXLAB_SCAN_CLONES void forward_row(const ScanDims& s, int64_t c0, int64_t c1, const S* u, const S* dl, const S* at,
                                    const S* bm, const S* cm, const S* d, const S* h0, S* y, S* h_final, S* ckpt) {
  const int64_t C = s.C, N = s.N, W = c1 - c0;
  std::vector<S> h(static_cast<size_t>(N * W), S(0)), du(static_cast<size_t>(W)), acc(static_cast<size_t>(W));
  if (h0)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < W; ++j) h[n * W + j] = h0[(c0 + j) * N + n];
  for (int64_t t = 0; t < s.T; ++t) {
    const S* dlt = dl + t * C + c0;
    const S* ut = u + t * C + c0;
#pragma omp simd
    for (int64_t j = 0; j < W; ++j) {
      du[j] = dlt[j] * ut[j];
      acc[j] = d[c0 + j] * ut[j];
    }
    for (int64_t n = 0; n < N; ++n) {
      const S bn = bm[t * N + n], cn = cm[t * N + n];
      const S* an = at + n * C + c0;
      S* hn = h.data() + n * W;
#pragma omp simd
      for (int64_t j = 0; j < W; ++j) {
        hn[j] = scan_exp(dlt[j] * an[j]) * hn[j] + du[j] * bn;
        acc[j] += cn * hn[j];
      }
    }
    S* yt = y + t * C + c0;
#pragma omp simd
    for (int64_t j = 0; j < W; ++j) yt[j] = acc[j];
    if (ckpt && (t + 1) % kScanChunk == 0 && t + 1 < s.T) {
      S* k = ckpt + (t + 1) / kScanChunk * N * C + c0;
      for (int64_t n = 0; n < N; ++n) std::memcpy(k + n * C, h.data() + n * W, static_cast<size_t>(W) * sizeof(S));
    }
  }
  if (h_final)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < W; ++j) h_final[(c0 + j) * N + n] = h[n * W + j];
}

// Channels per parallel work item: all of them when the batch rows alone keep the threads busy,
// else blocks of kChannelBlock so that a short batch (prefill, decode) still spreads.
int64_t channel_block(const ScanDims& s) {
  return s.B >= 2 * at::get_num_threads() ? s.C : std::min(s.C, kChannelBlock);
}

// With `decode`, the one pass of a step: rows run serially (a per-token parallel region costs
// more than one token's work) and the state h0 is updated in place (final_state unused). With
// `checkpoints` non-null it receives the backward pass's chunk checkpoints (B, chunks, N, C).
Tensor run_forward(const ScanDims& s, const Tensor& u, const Tensor& dl, const Tensor& a, const Tensor& b,
                   const Tensor& c, const Tensor& d, const Tensor& h0, Tensor* final_state, bool decode = false,
                   Tensor* checkpoints = nullptr) {
  auto y = torch::empty({s.B, s.T, s.C}, u.options());
  Tensor hT;
  if (final_state && !decode) hT = torch::empty({s.B, s.C, s.N}, u.options());
  const int64_t chunks = checkpoint_chunks(s.T);
  if (checkpoints) *checkpoints = torch::empty({s.B, chunks, s.N, s.C}, u.options());
  const auto at = a.t().contiguous();  // (N,C): rows contiguous over channels
  const int64_t width = decode ? s.C : channel_block(s), blocks = (s.C + width - 1) / width;
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan", [&] {
    using S = scalar_t;
    const S *pu = u.data_ptr<S>(), *pdl = dl.data_ptr<S>(), *pa = at.data_ptr<S>(), *pb = b.data_ptr<S>(),
            *pc = c.data_ptr<S>(), *pd = d.data_ptr<S>();
    const S* ph0 = h0.defined() ? h0.data_ptr<S>() : nullptr;
    S* py = y.data_ptr<S>();
    // forward_row reads its h0 slice before it writes h_final, so the two may be the same.
    S* phT = decode ? h0.data_ptr<S>() : (final_state ? hT.data_ptr<S>() : nullptr);
    S* pk = checkpoints ? checkpoints->data_ptr<S>() : nullptr;
    auto items = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i / blocks, c0 = (i % blocks) * width, c1 = std::min(s.C, c0 + width);
        forward_row<S>(s, c0, c1, pu + r * s.T * s.C, pdl + r * s.T * s.C, pa, pb + r * s.T * s.N, pc + r * s.T * s.N,
                       pd, ph0 ? ph0 + r * s.C * s.N : nullptr, py + r * s.T * s.C, phT ? phT + r * s.C * s.N : nullptr,
                       pk ? pk + r * chunks * s.N * s.C : nullptr);
      }
    };
    if (decode)
      items(0, s.B * blocks);
    else
      at::parallel_for(0, s.B * blocks, 1, items);
  });
  if (final_state && !decode) *final_state = hT;
  return y;
}

// The backward's block kernel of the instruction set `isa` (selective_scan_kernels.inc).
template <typename S>
void (*backward_kernel(CpuIsa isa))(const ScanBackwardBlock<S>&) {
#define MIXLAB_SCAN_BACKWARD(ns) \
  static_cast<void (*)(const ScanBackwardBlock<S>&)>(detail::selective_scan::ns::backward_block)
  return MIXLAB_ISA_SELECT(isa, MIXLAB_SCAN_BACKWARD);
#undef MIXLAB_SCAN_BACKWARD
}

class SelectiveScanFunction : public torch::autograd::Function<SelectiveScanFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& u, const Tensor& delta, const Tensor& a,
                               const Tensor& b, const Tensor& c, const Tensor& d, const Tensor& h0) {
    // h0: an empty tensor stands for "no initial state" (autograd's apply needs defined inputs).
    const ScanDims s{u.size(0), u.size(1), u.size(2), a.size(1)};
    Tensor checkpoints;
    auto y = run_forward(s, u, delta, a, b, c, d, h0.numel() > 0 ? h0 : Tensor(), nullptr, false, &checkpoints);
    ctx->save_for_backward({u, delta, a, b, c, d, h0, checkpoints});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &u = saved[0], &dl = saved[1], &a = saved[2], &b = saved[3], &c = saved[4], &d = saved[5],
               &checkpoints = saved[7];
    const Tensor h0 = saved[6].numel() > 0 ? saved[6] : Tensor();
    const ScanDims s{u.size(0), u.size(1), u.size(2), a.size(1)};
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    auto gy = grads[0].contiguous();
    // Work items are (row, block of channels). Blocks of one row own disjoint channels of du, dΔ,
    // da and dd; their shares of db and dc (sums over channels) go to one slice each, summed below.
    const int64_t width = backward_width(s), blocks = (s.C + width - 1) / width;
    auto du = torch::empty_like(u), ddl = torch::empty_like(dl);
    auto db_parts = torch::zeros({s.B, blocks, s.T, s.N}, u.options()), dc_parts = torch::zeros_like(db_parts);
    auto da_rows = torch::zeros({s.B, s.N, s.C}, u.options()), dd_rows = torch::zeros({s.B, s.C}, u.options());
    const auto at = a.t().contiguous();  // (N,C)
    const int64_t chunks = checkpoint_chunks(s.T);
    const CpuIsa isa = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
    AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "selective_scan_backward", [&] {
      using S = scalar_t;
      const auto kernel = backward_kernel<S>(isa);
      const S *pu = u.data_ptr<S>(), *pdl = dl.data_ptr<S>(), *pa = at.data_ptr<S>(), *pb = b.data_ptr<S>(),
              *pc = c.data_ptr<S>(), *pd = d.data_ptr<S>(), *pgy = gy.data_ptr<S>(), *pk = checkpoints.data_ptr<S>();
      const S* ph0 = h0.defined() ? h0.data_ptr<S>() : nullptr;
      at::parallel_for(0, s.B * blocks, 1, [&](int64_t i0, int64_t i1) {
        // Kept between calls (ThreadScratch): fresh buffers were page-faulted in on every call.
        ThreadScratch scratch;
        S* work = scratch.get<S>(static_cast<size_t>(detail::selective_scan::backward_work(s.N, width)));
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i / blocks, c0 = (i % blocks) * width, c1 = std::min(s.C, c0 + width);
          const int64_t tc = r * s.T * s.C, tn = r * s.T * s.N, part = i * s.T * s.N;
          ScanBackwardBlock<S> block;
          block.T = s.T, block.C = s.C, block.N = s.N, block.c0 = c0, block.c1 = c1;
          block.u = pu + tc, block.dl = pdl + tc, block.at = pa, block.bm = pb + tn, block.cm = pc + tn, block.d = pd;
          block.h0 = ph0 ? ph0 + r * s.C * s.N : nullptr, block.ckpt = pk + r * chunks * s.N * s.C, block.gy = pgy + tc;
          block.du = du.data_ptr<S>() + tc, block.ddl = ddl.data_ptr<S>() + tc;
          block.db = db_parts.data_ptr<S>() + part, block.dc = dc_parts.data_ptr<S>() + part;
          block.da_row = da_rows.data_ptr<S>() + r * s.N * s.C, block.dd_row = dd_rows.data_ptr<S>() + r * s.C;
          block.work = work;
          kernel(block);
        }
      });
    });
    return {du, ddl, da_rows.sum(0).t().contiguous(), db_parts.sum(1), dc_parts.sum(1), dd_rows.sum(0), Tensor()};
  }
};

}  // namespace

Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                      const Tensor& d, const Tensor& h0, Tensor* final_state) {
  const ScanDims s = check_scan("selective_scan", u, delta, a, b, c, d, h0);
  auto uc = u.contiguous(), dlc = delta.contiguous(), ac = a.contiguous(), bc = b.contiguous(), cc = c.contiguous(),
       dc = d.contiguous();
  auto h0c = h0.defined() ? h0.contiguous() : Tensor();
  const bool records =
      torch::GradMode::is_enabled() && (u.requires_grad() || delta.requires_grad() || a.requires_grad() ||
                                        b.requires_grad() || c.requires_grad() || d.requires_grad());
  if (final_state) {
    // The final state is not differentiable: prefill's path, no autograd record.
    MIXLAB_CHECK(!records,
                 "selective_scan: final_state is not differentiable; ask for it under NoGradGuard / InferenceMode");
    return run_forward(s, uc, dlc, ac, bc, cc, dc, h0c, final_state);
  }
  // Nothing to differentiate: no autograd node, and no checkpoints for a backward that never runs.
  if (!records) return run_forward(s, uc, dlc, ac, bc, cc, dc, h0c, nullptr);
  return SelectiveScanFunction::apply(uc, dlc, ac, bc, cc, dc, h0c.defined() ? h0c : torch::empty({0}, u.options()))[0];
}

Tensor selective_scan_reference(const Tensor& u, const Tensor& delta, const Tensor& a, const Tensor& b, const Tensor& c,
                                const Tensor& d, const Tensor& h0, Tensor* final_state) {
  const ScanDims s = check_scan("selective_scan_reference", u, delta, a, b, c, d, h0);
  auto decay = torch::exp(delta.unsqueeze(-1) * a);         // (B,T,C,N)
  auto input = (delta * u).unsqueeze(-1) * b.unsqueeze(2);  // (B,T,C,N)
  auto h = h0.defined() ? h0 : torch::zeros({s.B, s.C, s.N}, u.options());
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < s.T; ++t) {
    h = decay.select(1, t) * h + input.select(1, t);
    ys.push_back((h * c.select(1, t).unsqueeze(1)).sum(-1));  // (B,C)
  }
  if (final_state) *final_state = h;
  return torch::stack(ys, 1) + d * u;
}

Tensor selective_scan_step(Tensor& h, const Tensor& u_t, const Tensor& delta_t, const Tensor& a, const Tensor& b_t,
                           const Tensor& c_t, const Tensor& d) {
  const char* fn = "selective_scan_step";
  check_dim(fn, "h", h, 3, "(B,C,N)");
  auto u1 = u_t.unsqueeze(1).contiguous(), dl1 = delta_t.unsqueeze(1).contiguous(), b1 = b_t.unsqueeze(1).contiguous(),
       c1 = c_t.unsqueeze(1).contiguous();
  const ScanDims s = check_scan(fn, u1, dl1, a, b1, c1, d, h.detach());
  MIXLAB_CHECK(h.is_contiguous(), "{}: h must be contiguous (the state is updated in place)", fn);
  torch::NoGradGuard no_grad;
  // The scan's own pass at T = 1: a step and the scan's row t are the same operations, so decode
  // equals the parallel forward bitwise.
  return run_forward(s, u1, dl1, a.contiguous(), b1, c1, d.contiguous(), h, nullptr, /*decode=*/true).squeeze(1);
}

}  // namespace mixlab
