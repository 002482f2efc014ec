// The resolvent op: boundary checks, the autograd Function around the CPU kernels, the dense
// reference and the decode step.
#include <torch/torch.h>

#include <atomic>
#include <unordered_map>

#include "mixlab/core/error.h"
#include "mixlab/core/isa_dispatch.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/resolvent/resolvent.h"
#include "resolvent_dense_blocks.h"
#include "resolvent_gate.h"
#include "resolvent_kernel.h"
#include "resolvent_plain_loops.h"
#include "resolvent_row_kernels.h"

namespace mixlab {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t resolvent_width(const Pattern& pattern, int64_t T) {
  // Plain patterns: O(log) from the offsets; +cache: the cached index.
  return pattern.translation_invariant() ? pattern.max_width(T) : pattern_index(pattern, T)->W;
}

std::vector<int64_t> resolvent_row_counts(const Pattern& pattern, int64_t t0, int64_t T) {
  std::vector<int64_t> out(static_cast<size_t>(T));
  if (pattern.translation_invariant()) {
    const auto offs = pattern.offsets_upto(t0 + T - 1);
    size_t c = 0;
    for (int64_t i = 0; i < T; ++i) {
      while (c < offs.size() && offs[c] <= t0 + i) ++c;
      out[i] = static_cast<int64_t>(c);
    }
  } else {
    auto index = pattern_index(pattern, t0 + T);
    std::copy(index->count.begin() + t0, index->count.begin() + t0 + T, out.begin());
  }
  return out;
}

ResolventRows resolvent_rows(const Pattern& pattern, int64_t T, const ResolventState* past) {
  ResolventRows r;
  r.t0 = past ? past->position() : 0;
  r.T = T;
  if (r.t0 == 0 && pattern.translation_invariant()) {
    // Translation-invariant: row i reads i − f for the offsets f <= i; no (T,W) index.
    r.offsets_holder = pattern.offsets_upto(T - 1);
    r.offsets = r.offsets_holder.data();
    r.W = static_cast<int64_t>(r.offsets_holder.size());
    r.count_holder = resolvent_row_counts(pattern, 0, T);
    r.count = r.count_holder.data();
    return r;
  }
  r.index = pattern_index(pattern, r.t0 + T);
  r.W = r.index->W;
  r.count = r.index->count.data() + r.t0;
  if (r.t0 == 0) {
    r.src = r.index->past.data();
    return r;
  }
  // Rows read positions < t0 from the state: number them in order of first use.
  r.src_holder = torch::empty({T, std::max<int64_t>(r.W, 1)}, torch::kLong);
  int64_t* src = r.src_holder.data_ptr<int64_t>();
  std::unordered_map<int64_t, int64_t> seen;
  for (int64_t i = 0; i < T; ++i) {
    const int64_t* row = r.index->row(r.t0 + i);
    for (int64_t s = 0; s < r.W; ++s) {
      const int64_t j = s < r.count[i] ? row[s] : -1;
      int64_t v = -1;
      if (j >= r.t0) {
        v = j - r.t0;
      } else if (j >= 0) {
        auto it = seen.find(j);
        if (it == seen.end()) {
          MIXLAB_ASSERT(past->slot_of(j) >= 0, "state at position {} does not hold position {} read by row {}", r.t0, j,
                        r.t0 + i);
          it = seen.emplace(j, static_cast<int64_t>(r.past_positions.size())).first;
          r.past_positions.push_back(j);
        }
        v = -(it->second + 2);
      }
      src[i * r.W + s] = v;
    }
  }
  r.src = src;
  return r;
}

ResolventRows resolvent_rows_restore(const Pattern& pattern, int64_t t0, int64_t T, const Tensor& src) {
  if (t0 == 0) return resolvent_rows(pattern, T, nullptr);
  ResolventRows r;
  r.t0 = t0;
  r.T = T;
  r.index = pattern_index(pattern, t0 + T);
  r.W = r.index->W;
  r.count = r.index->count.data() + t0;
  r.src_holder = src;
  r.src = r.src_holder.data_ptr<int64_t>();
  return r;
}

namespace {

constexpr const char* kFn = "resolvent_forward";

template <typename scalar_t>
detail::ResolventParams<scalar_t> make_params(const ResolventRows& rows, int64_t D, int64_t WA, int64_t WB,
                                              int64_t Np) {
  detail::ResolventParams<scalar_t> p;
  p.T = rows.T;
  p.D = D;
  p.W = rows.W;
  p.WA = WA;
  p.WB = WB;
  p.Np = Np;
  p.src = rows.src;
  p.count = rows.count;
  p.offsets = rows.offsets;
  return p;
}

// Rebuilds the read table in backward from what the context saved (pattern_index is cached, so
// this is a lookup, not a rebuild).
ResolventRows rows_from_context(AutogradContext* ctx) {
  return resolvent_rows_restore(Pattern::parse(ctx->saved_data["spec"].toStringRef()), ctx->saved_data["t0"].toInt(),
                                ctx->saved_data["T"].toInt(),
                                ctx->saved_data.count("src") ? ctx->saved_data["src"].toTensor() : Tensor());
}

// The blocked kernel pays when rows read far back (measured: pow2 and square at T >= 16384,
// docs/log/benchmarks-2026-11.md (resolvent section)); when every offset stays within a block (band:W with W < 64,
// order:K, short offset lists) the row kernel already reads cached rows and is faster. Windows
// of every offset 1..W with W >= 64 take the BLAS-3 block solve instead (resolvent_dense_blocks.h).
bool blocked(const ResolventRows& rows) {
  return rows.offsets != nullptr && rows.W > 0 && rows.offsets[rows.W - 1] > detail::kBlockRows;
}

// Rows of the past snapshot: px holds them when A reads past inputs, py when B reads past outputs
// (either may be empty).
int64_t past_rows(const Tensor& px, const Tensor& py) {
  if (px.numel() > 0) return px.size(2);
  if (py.numel() > 0) return py.size(2);
  return 0;
}

// The tensors one call hands the kernels, and where slice bh of each starts. Forward, backward
// and the decode step pack their per-slice pointers here, once.
struct SliceInputs {
  Tensor alpha, beta, gate, x, px, py;  // gate, px, py may be empty
  int64_t npx = 0, npy = 0;             // rows per slice of px / py

  template <typename scalar_t>
  detail::resolvent_loops::SlicePointers<scalar_t> pointers() const {
    detail::resolvent_loops::SlicePointers<scalar_t> sp;
    sp.alpha = alpha.data_ptr<scalar_t>();
    sp.beta = beta.data_ptr<scalar_t>();
    sp.gate = gate.numel() > 0 ? gate.data_ptr<scalar_t>() : nullptr;
    sp.x = x.data_ptr<scalar_t>();
    sp.px = px.numel() > 0 ? px.data_ptr<scalar_t>() : nullptr;
    sp.py = py.numel() > 0 ? py.data_ptr<scalar_t>() : nullptr;
    sp.npx = npx;
    sp.npy = npy;
    return sp;
  }
};

// The plain loops' build for one instruction set (resolvent_plain_loops.h).
template <typename scalar_t>
struct PlainLoops {
  void (*forward)(const detail::ResolventParams<scalar_t>&, const detail::resolvent_loops::SlicePointers<scalar_t>&,
                  bool, scalar_t*, int64_t, int64_t);
  void (*backward)(const detail::ResolventParams<scalar_t>&, const detail::resolvent_loops::SlicePointers<scalar_t>&,
                   bool, const scalar_t*, const detail::ResolventGrads<scalar_t>&, int64_t, int64_t);
};

// The plain loops of `isa`: the caller reads cpu_isa() once per call (mixlab/core/cpu_isa.h;
// MIXLAB_CPU_ISA may ask for a lower set, and it may throw: before the parallel region).
template <typename scalar_t>
PlainLoops<scalar_t> plain_loops(CpuIsa isa) {
  namespace rl = detail::resolvent_loops;
#define MIXLAB_RESOLVENT_PLAIN_LOOPS(ns)                                               \
  PlainLoops<scalar_t> {                                                               \
    static_cast<decltype(PlainLoops<scalar_t>::forward)>(rl::ns::forward_slices),      \
        static_cast<decltype(PlainLoops<scalar_t>::backward)>(rl::ns::backward_slices) \
  }
  return MIXLAB_ISA_SELECT(isa, MIXLAB_RESOLVENT_PLAIN_LOOPS);
#undef MIXLAB_RESOLVENT_PLAIN_LOOPS
}

// The forward's loops for one call, picked on the calling thread (cpu_isa() may throw and the
// guard is per thread: both outside the parallel region).
template <typename scalar_t>
struct ForwardLoops {
  using RowSlice = void (*)(const detail::ResolventParams<scalar_t>&, detail::resolvent_rows::RowFlags, scalar_t*);
  PlainLoops<scalar_t> plain{};
  RowSlice rows = nullptr;  // the register kernels of resolvent_row_kernels.h, when they apply
};

// Whether the register kernels take this call: D whole 16-byte vectors, not forced off, and the BLAS-3
// block solve (wide contiguous windows), which stays first where it applies, does not.
template <typename scalar_t>
bool register_kernels_apply(const detail::ResolventParams<scalar_t>& base) {
  return !ResolventPlainLoopsGuard::active() && detail::resolvent_rows::supports<scalar_t>(base.D) &&
         !detail::dense_blocks_apply(base);
}

template <typename scalar_t>
ForwardLoops<scalar_t> forward_loops(const detail::ResolventParams<scalar_t>& base) {
  namespace rk = detail::resolvent_rows;
  ForwardLoops<scalar_t> l;
  const CpuIsa isa = cpu_isa();
  l.plain = plain_loops<scalar_t>(isa);  // one cpu_isa() read per call
  if (register_kernels_apply(base)) {
#define MIXLAB_RESOLVENT_ROWS(ns) static_cast<typename ForwardLoops<scalar_t>::RowSlice>(rk::ns::forward_slice)
    l.rows = MIXLAB_ISA_SELECT(isa, MIXLAB_RESOLVENT_ROWS);
#undef MIXLAB_RESOLVENT_ROWS
  }
  return l;
}

// The backward's register kernel for this call, or null where the plain loops run it.
template <typename scalar_t>
using RowBackward = void (*)(const detail::ResolventParams<scalar_t>&, detail::resolvent_rows::RowFlags,
                             const detail::ResolventReaders&, const scalar_t*, const detail::ResolventGrads<scalar_t>&);

template <typename scalar_t>
RowBackward<scalar_t> backward_rows(const detail::ResolventParams<scalar_t>& base, CpuIsa isa) {
  if (!register_kernels_apply(base)) return nullptr;
#define MIXLAB_RESOLVENT_ROWS(ns) static_cast<RowBackward<scalar_t>>(detail::resolvent_rows::ns::backward_slice)
  return MIXLAB_ISA_SELECT(isa, MIXLAB_RESOLVENT_ROWS);
#undef MIXLAB_RESOLVENT_ROWS
}

// Whether the register backward reads G where it lies instead of a copy of G in h: for patterns
// whose rows read only near rows (fixed offsets spanning at most kNearReadBytes of one slice).
// Without the copy, order:1's forward + backward ran 1.01–1.25x faster at T 1024–16384 (B 1,
// H 4, D 64, 2 threads; four interleaved A/B runs, 2026-12-03), but pow2's ran 0.83–0.91x as fast
// at T 4096 and 16384 in all three runs that had it, so the patterns that read far rows keep the
// copy. The likely cause (not measured): their gather waits on the far reads, and a second (T,D)
// stream beside h costs it more than the streaming copy does (docs/log/benchmarks-2026-12.md,
// "The resolvent backward without G's copy").
constexpr int64_t kNearReadBytes = 64 * 1024;

template <typename scalar_t>
bool reads_gradient_in_place(const detail::ResolventParams<scalar_t>& base) {
  return base.offsets != nullptr && base.W > 0 &&
         base.offsets[base.W - 1] * base.D * static_cast<int64_t>(sizeof(scalar_t)) <= kNearReadBytes;
}

// Forward of slices [begin, end) with the loops forward_loops() picked.
template <typename scalar_t>
void forward_slices_isa(const ForwardLoops<scalar_t>& loops, const detail::ResolventParams<scalar_t>& base,
                        const SliceInputs& in, bool use_blocked, scalar_t* y, int64_t begin, int64_t end) {
  const auto sp = in.pointers<scalar_t>();
  if (loops.rows) {
    const detail::resolvent_rows::RowFlags flags{base.WA > 1, base.WB > 0, in.gate.numel() > 0};
    for (int64_t bh = begin; bh < end; ++bh) loops.rows(sp.at(base, bh), flags, y + bh * base.T * base.D);
    return;
  }
  loops.plain.forward(base, sp, use_blocked, y, begin, end);
}

class ResolventFunction : public torch::autograd::Function<ResolventFunction> {
 public:
  // alpha (B,H,T,WA), beta (B,H,T,WB), gate (B,H,T,D) or empty, x (B,H,T,D),
  // px/py (B,H,Np,D) snapshot of the past rows read (or empty).
  static variable_list forward(AutogradContext* ctx, const Tensor& alpha_in, const Tensor& beta_in,
                               const Tensor& gate_in, const Tensor& x_in, const Tensor& px_in, const Tensor& py_in,
                               const ResolventRows* rows, const std::string& spec) {
    auto alpha = alpha_in.contiguous(), beta = beta_in.contiguous(), x = x_in.contiguous();
    auto gate = gate_in.contiguous(), px = px_in.contiguous(), py = py_in.contiguous();
    auto y = solve(alpha, beta, gate, x, px, py, *rows);
    ctx->save_for_backward({alpha, beta, gate, x, px, py, y});
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["t0"] = rows->t0;
    ctx->saved_data["T"] = rows->T;
    if (rows->t0 > 0) ctx->saved_data["src"] = rows->src_holder;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &alpha = saved[0], &beta = saved[1], &gate = saved[2], &x = saved[3], &px = saved[4], &py = saved[5],
               &y = saved[6];
    auto rows = rows_from_context(ctx);
    Tensor g = grads[0].defined() ? grads[0].to(x.scalar_type()).contiguous() : torch::zeros_like(x);
    const bool gated = gate.numel() > 0;
    const int64_t BH = x.size(0) * x.size(1), D = x.size(3);
    const int64_t WA = alpha.size(3), WB = beta.size(3), Np = past_rows(px, py);
    Tensor h;  // H = (I − B)⁻ᵀ G, written over a copy of G, or whole from G (reads_gradient_in_place)
    auto dalpha = torch::zeros_like(alpha), dbeta = torch::zeros_like(beta);
    Tensor dx, dgate;
    const SliceInputs in{alpha, beta, gate, x, px, py, Np, Np};
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "resolvent_backward", [&] {
      const auto base = make_params<scalar_t>(rows, D, WA, WB, Np);
      const bool use_blocked = blocked(rows);
      const CpuIsa isa = cpu_isa();  // may throw (MIXLAB_CPU_ISA): outside the parallel region
      const auto rows_backward = backward_rows(base, isa);
      // The register kernel writes dx and dg whole; the plain loops add into them.
      dx = rows_backward ? torch::empty_like(x) : torch::zeros_like(x);
      const bool in_place = rows_backward && reads_gradient_in_place(base);
      h = in_place ? torch::empty_like(g) : g.clone();
      if (gated) dgate = rows_backward ? torch::empty_like(gate) : torch::zeros_like(gate);
      detail::ResolventGrads<scalar_t> grads_base;
      grads_base.h = h.data_ptr<scalar_t>();
      grads_base.dalpha = dalpha.data_ptr<scalar_t>();
      grads_base.dbeta = dbeta.data_ptr<scalar_t>();
      grads_base.dx = dx.data_ptr<scalar_t>();
      grads_base.dgate = gated ? dgate.data_ptr<scalar_t>() : nullptr;
      if (in_place) grads_base.dy = g.data_ptr<scalar_t>();
      const auto sp = in.pointers<scalar_t>();
      if (rows_backward) {
        const auto readers = detail::resolvent_readers(base);  // the slices share one table
        const detail::resolvent_rows::RowFlags flags{WA > 1, WB > 0, gated};
        const scalar_t* yp = y.data_ptr<scalar_t>();
        at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
          for (int64_t bh = begin; bh < end; ++bh)
            rows_backward(sp.at(base, bh), flags, readers, yp + bh * rows.T * D,
                          grads_base.slice(bh, rows.T, D, WA, WB));
        });
        return;
      }
      const auto loops = plain_loops<scalar_t>(isa);
      at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
        loops.backward(base, sp, use_blocked, y.data_ptr<scalar_t>(), grads_base, begin, end);
      });
    });
    return {dalpha, dbeta, dgate, dx, Tensor(), Tensor(), Tensor(), Tensor()};
  }

  static Tensor solve(const Tensor& alpha, const Tensor& beta, const Tensor& gate, const Tensor& x, const Tensor& px,
                      const Tensor& py, const ResolventRows& rows) {
    const int64_t BH = x.size(0) * x.size(1), D = x.size(3);
    const int64_t WA = alpha.size(3), WB = beta.size(3), Np = past_rows(px, py);
    auto y = torch::empty_like(x);
    const SliceInputs in{alpha, beta, gate, x, px, py, Np, Np};
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "resolvent_forward", [&] {
      const auto base = make_params<scalar_t>(rows, D, WA, WB, Np);
      const bool use_blocked = blocked(rows);
      const auto loops = forward_loops(base);
      at::parallel_for(0, BH, 1, [&](int64_t begin, int64_t end) {
        forward_slices_isa(loops, base, in, use_blocked, y.data_ptr<scalar_t>(), begin, end);
      });
    });
    return y;
  }
};

// The gate is a probability per row and channel (seed 000 B.2: g in [0, 1]^d, A = (1 − diag g)Ã,
// B = diag(g) B̃): one pass over it, in parallel chunks, refusing NaN too (every comparison with
// NaN is false). The message names the first bad value and its index in the tensor's own sizes.
void check_gate_values(const char* fn, const char* name, const Tensor& gate) {
  const Tensor g = gate.detach().contiguous();  // a copy only for a non-contiguous gate
  const int64_t n = g.numel();
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "resolvent_gate_values", [&] {
    const scalar_t* p = g.data_ptr<scalar_t>();
    auto in_range = [](scalar_t v) { return v >= scalar_t(0) && v <= scalar_t(1); };
    std::atomic<bool> bad{false};
    at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
      bool out = false;
      for (int64_t i = begin; i < end; ++i) out |= !in_range(p[i]);
      if (out) bad = true;
    });
    if (!bad) return;
    int64_t i = 0;
    while (in_range(p[i])) ++i;
    std::vector<int64_t> index(static_cast<size_t>(g.dim()));
    for (int64_t d = g.dim() - 1, rest = i; d >= 0; --d) {
      index[static_cast<size_t>(d)] = rest % g.size(d);
      rest /= g.size(d);
    }
    MIXLAB_FAIL(
        "{}: {} must hold values in [0, 1] (a gate: a probability per row and channel, seed 000 B.2; NaN and inf are "
        "refused), got {} at [{}]",
        fn, name, static_cast<double>(p[i]), fmt::join(index, ","));
  });
}

// Shared boundary checks of forward and reference; returns W. `gate_values`: also check that the
// gate lies in [0, 1] (every public entry; not the layer's own sigmoid gates, resolvent_gate.h).
int64_t check_inputs(const char* fn, const Tensor& alpha, const Tensor& beta, const Tensor& x, const Pattern& pattern,
                     const Tensor& gate, int64_t t0, bool gate_values, bool allow_diagonal_alpha = true) {
  check_dim(fn, "x", x, 4, "(B,H,T,D)");
  check_floating(fn, "x", x);
  check_cpu(fn, "x", x);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  MIXLAB_CHECK(T >= 1, "{}: x must have T >= 1 rows (B,H,T,D), got shape {}", fn, shape_string(x));
  const int64_t W = resolvent_width(pattern, t0 + T);
  check_dim(fn, "alpha", alpha, 4, "(B,H,T,W_A)");
  check_cpu(fn, "alpha", alpha);
  check_same_dtype(fn, "alpha", alpha, "x", x);
  const bool alpha_ok = alpha.size(0) == B && alpha.size(1) == H && alpha.size(2) == T &&
                        (alpha.size(3) == W + 1 || (allow_diagonal_alpha && alpha.size(3) == 1));
  MIXLAB_CHECK(alpha_ok,
               "{}: alpha must have shape (B,H,T,W_A) = [{},{},{},{}] (W_A = W+1 for pattern '{}' at length {}, or 1 "
               "for a diagonal A), got {}",
               fn, B, H, T, W + 1, pattern.spec(), t0 + T, shape_string(alpha));
  check_dim(fn, "beta", beta, 4, "(B,H,T,W_B)");
  check_cpu(fn, "beta", beta);
  check_same_dtype(fn, "beta", beta, "x", x);
  const int64_t WB = pattern.recurrent() ? W : 0;
  MIXLAB_CHECK(
      beta.size(0) == B && beta.size(1) == H && beta.size(2) == T && beta.size(3) == WB,
      "{}: beta must have shape (B,H,T,W_B) = [{},{},{},{}] (W_B = {} for {} pattern '{}' at length {}), got {}", fn, B,
      H, T, WB, pattern.recurrent() ? "W" : "0", pattern.recurrent() ? "recurrent" : "non-recurrent", pattern.spec(),
      t0 + T, shape_string(beta));
  if (gate.defined()) {
    check_cpu(fn, "gate", gate);
    check_same_dtype(fn, "gate", gate, "x", x);
    check_shape(fn, "gate", gate, {B, H, T, D}, "(B,H,T,D)");
    if (gate_values) check_gate_values(fn, "gate", gate);
  }
  return W;
}

Tensor forward_impl(const Tensor& alpha, const Tensor& beta, const Tensor& x, const Pattern& pattern,
                    const Tensor& gate, const ResolventState* past, bool gate_values) {
  const int64_t t0 = past ? past->position() : 0;
  if (past) {
    check_dim(kFn, "x", x, 4, "(B,H,T,D)");
    MIXLAB_CHECK(past->pattern().spec() == pattern.spec(), "{}: past state has pattern '{}', expected '{}'", kFn,
                 past->pattern().spec(), pattern.spec());
    MIXLAB_CHECK(x.size(0) == past->batch() && x.size(1) == past->heads() && x.size(3) == past->head_dim(),
                 "{}: x must have shape (B,H,T,D) = [{},{},*,{}] to continue the past state, got {}", kFn,
                 past->batch(), past->heads(), past->head_dim(), shape_string(x));
    MIXLAB_CHECK(x.scalar_type() == past->dtype(), "{}: x must have the past state's dtype {}, got {}", kFn,
                 c10::toString(past->dtype()), c10::toString(x.scalar_type()));
  }
  check_inputs(kFn, alpha, beta, x, pattern, gate, t0, gate_values);
  if (past) {
    MIXLAB_CHECK(alpha.size(3) == 1 || past->layout().store_x,
                 "{}: alpha must have W_A = 1 (diagonal A) with a past state that does not store x, got {}", kFn,
                 shape_string(alpha));
    MIXLAB_CHECK(beta.size(3) == 0 || past->layout().store_y,
                 "{}: the past state does not store y, but beta has W_B = {}", kFn, beta.size(3));
  }
  auto rows = resolvent_rows(pattern, x.size(2), past);
  Tensor px = torch::empty({0}, x.options()), py = torch::empty({0}, x.options());
  if (!rows.past_positions.empty()) {
    if (alpha.size(3) > 1) px = past->gather(past->x_slots(), rows.past_positions);
    if (beta.size(3) > 0) py = past->gather(past->y_slots(), rows.past_positions);
  }
  Tensor g = gate.defined() ? gate : torch::empty({0}, x.options());
  return ResolventFunction::apply(alpha, beta, g, x, px, py, &rows, pattern.spec())[0];
}

Tensor step_impl(ResolventState& state, const Tensor& alpha_t, const Tensor& beta_t, const Tensor& x_t,
                 const Tensor& gate_t, const std::vector<Tensor>& extras_t, bool gate_values);

}  // namespace

Tensor resolvent_forward(const Tensor& alpha, const Tensor& beta, const Tensor& x, const Pattern& pattern,
                         const Tensor& gate, const ResolventState* past) {
  return forward_impl(alpha, beta, x, pattern, gate, past, /*gate_values=*/true);
}

Tensor detail::resolvent_forward_sigmoid_gate(const Tensor& alpha, const Tensor& beta, const Tensor& x,
                                              const Pattern& pattern, const Tensor& gate, const ResolventState* past) {
  return forward_impl(alpha, beta, x, pattern, gate, past, /*gate_values=*/false);
}

Tensor resolvent_step(ResolventState& state, const Tensor& alpha_t, const Tensor& beta_t, const Tensor& x_t,
                      const Tensor& gate_t, const std::vector<Tensor>& extras_t) {
  return step_impl(state, alpha_t, beta_t, x_t, gate_t, extras_t, /*gate_values=*/true);
}

Tensor detail::resolvent_step_sigmoid_gate(ResolventState& state, const Tensor& alpha_t, const Tensor& beta_t,
                                           const Tensor& x_t, const Tensor& gate_t,
                                           const std::vector<Tensor>& extras_t) {
  return step_impl(state, alpha_t, beta_t, x_t, gate_t, extras_t, /*gate_values=*/false);
}

Tensor resolvent_reference(const Tensor& alpha, const Tensor& beta, const Tensor& x, const Pattern& pattern,
                           const Tensor& gate) {
  const char* fn = "resolvent_reference";
  const int64_t W = check_inputs(fn, alpha, beta, x, pattern, gate, 0, /*gate_values=*/true);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2);
  auto index = pattern_index(pattern, T);
  const int64_t WA = alpha.size(3);
  // Column of every slot (unused slots point at the diagonal with a zero coefficient).
  auto colA = torch::empty({T, WA}, torch::kLong), mA = torch::zeros({T, WA}, torch::kDouble);
  auto colB = torch::empty({T, std::max<int64_t>(W, 1)}, torch::kLong),
       mB = torch::zeros({T, std::max<int64_t>(W, 1)}, torch::kDouble);
  auto cA = colA.accessor<int64_t, 2>(), cB = colB.accessor<int64_t, 2>();
  auto maskA = mA.accessor<double, 2>(), maskB = mB.accessor<double, 2>();
  for (int64_t i = 0; i < T; ++i) {
    cA[i][0] = i;
    maskA[i][0] = 1;
    for (int64_t s = 0; s < std::max<int64_t>(W, 1); ++s) {
      const bool used = s < index->count[i];
      const int64_t j = used ? index->row(i)[s] : i;
      if (s + 1 < WA) {
        cA[i][s + 1] = j;
        if (used) maskA[i][s + 1] = 1;
      }
      cB[i][s] = j;
      if (used) maskB[i][s] = 1;
    }
  }
  auto A = torch::zeros({B, H, T, T}, x.options())
               .scatter_add(3, colA.expand({B, H, T, WA}), alpha * mA.to(x.scalar_type()));
  auto Bm = torch::zeros({B, H, T, T}, x.options());
  if (beta.size(3) > 0)
    Bm = Bm.scatter_add(3, colB.narrow(1, 0, W).expand({B, H, T, W}), beta * mB.narrow(1, 0, W).to(x.scalar_type()));
  auto I = torch::eye(T, x.options());
  if (!gate.defined()) return torch::linalg_solve_triangular(I - Bm, torch::matmul(A, x), /*upper=*/false);
  // Per channel d: y^d = (I − diag(g^d) B)⁻¹ diag(1 − g^d) A x^d, as (B,H,D,T,T) matrices.
  auto gt = gate.transpose(2, 3).unsqueeze(-1);  // (B,H,D,T,1)
  auto Ad = (1 - gt) * A.unsqueeze(2), Bd = gt * Bm.unsqueeze(2);
  auto xd = x.transpose(2, 3).unsqueeze(-1);  // (B,H,D,T,1)
  auto yd = torch::linalg_solve_triangular(I - Bd, torch::matmul(Ad, xd), /*upper=*/false);
  return yd.squeeze(-1).transpose(2, 3);
}

namespace {

Tensor step_impl(ResolventState& state, const Tensor& alpha_t, const Tensor& beta_t, const Tensor& x_t,
                 const Tensor& gate_t, const std::vector<Tensor>& extras_t, bool gate_values) {
  const char* fn = "resolvent_step";
  const int64_t B = state.batch(), H = state.heads(), D = state.head_dim(), t = state.position();
  const auto& pattern = state.pattern();
  const auto row = state.next_row();  // P(t)
  const int64_t c = static_cast<int64_t>(row.size());
  check_shape(fn, "x_t", x_t, {B, H, D}, "(B,H,D)");
  check_cpu(fn, "x_t", x_t);
  MIXLAB_CHECK(x_t.scalar_type() == state.dtype(), "{}: x_t must have the state's dtype {}, got {}", fn,
               c10::toString(state.dtype()), c10::toString(x_t.scalar_type()));
  check_dim(fn, "alpha_t", alpha_t, 3, "(B,H,W_A)");
  check_same_dtype(fn, "alpha_t", alpha_t, "x_t", x_t);
  const bool alpha_ok = alpha_t.size(0) == B && alpha_t.size(1) == H &&
                        ((alpha_t.size(2) == c + 1 && state.layout().store_x) || alpha_t.size(2) == 1);
  MIXLAB_CHECK(alpha_ok, "{}: alpha_t must have shape (B,H,W_A) = [{},{},{}] (1 + |P(t)| at t = {}{}), got {}", fn, B,
               H, state.layout().store_x ? c + 1 : 1, t, state.layout().store_x ? "" : ", state without x",
               shape_string(alpha_t));
  const int64_t WB = pattern.recurrent() ? c : 0;
  check_same_dtype(fn, "beta_t", beta_t, "x_t", x_t);
  check_shape(fn, "beta_t", beta_t, {B, H, WB}, "(B,H,W_B)");
  if (gate_t.defined()) {
    check_same_dtype(fn, "gate_t", gate_t, "x_t", x_t);
    check_shape(fn, "gate_t", gate_t, {B, H, D}, "(B,H,D)");
    if (gate_values) check_gate_values(fn, "gate_t", gate_t);
  }
  MIXLAB_CHECK(WB == 0 || state.layout().store_y, "{}: the state does not store y, but beta_t has W_B = {}", fn, WB);
  // Read the held slots in place: src = −(slot + 2) into the slot tensors.
  std::vector<int64_t> src(std::max<int64_t>(c, 1), -1);
  for (int64_t s = 0; s < c; ++s) {
    src[s] = -(state.slot_of(row[s]) + 2);
    MIXLAB_ASSERT(src[s] <= -2, "state at position {} does not hold position {}", t, row[s]);
  }
  const int64_t count = c;
  auto alpha = alpha_t.contiguous(), beta = beta_t.contiguous(), x = x_t.contiguous();
  auto gate = gate_t.defined() ? gate_t.contiguous() : Tensor();
  auto y = torch::empty_like(x);
  const int64_t WA = alpha.size(2), BH = B * H;
  const auto& xs = state.x_slots();
  const auto& ys = state.y_slots();
  const int64_t cap_x = xs.defined() ? xs.size(2) : 0, cap_y = ys.defined() ? ys.size(2) : 0;
  const auto empty = torch::empty({0}, x.options());
  // The held slot tensors are the past rows: src = −(slot + 2) reads slot rows in place.
  const SliceInputs in{alpha, beta, gate.defined() ? gate : empty, x, cap_x ? xs : empty, cap_y ? ys : empty,
                       cap_x, cap_y};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "resolvent_step", [&] {
    detail::ResolventParams<scalar_t> base;
    base.T = 1;
    base.D = D;
    base.W = std::max<int64_t>(c, 1);
    base.WA = WA;
    base.WB = WB;
    base.src = src.data();
    base.count = &count;
    const auto loops = forward_loops(base);
    at::parallel_for(0, BH, 16, [&](int64_t begin, int64_t end) {
      forward_slices_isa(loops, base, in, /*use_blocked=*/false, y.data_ptr<scalar_t>(), begin, end);
    });
  });
  std::vector<Tensor> extras;
  for (const auto& e : extras_t) extras.push_back(e.unsqueeze(2));
  state.append(x.unsqueeze(2), y.unsqueeze(2), extras);
  return y;
}

}  // namespace

}  // namespace mixlab
