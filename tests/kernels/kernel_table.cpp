// The rows of the kernel table (kernel_table.h says what the table is, what it is not, and how to
// add a row). Inputs are drawn as each kernel's own tests draw them; tolerances are those tests'
// for the same comparison (the test file is named at each row).
#include "kernels/kernel_table.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "mixlab/attention/block_attention.h"
#include "mixlab/attention/causal_attention.h"
#include "mixlab/brl/brl_mixer.h"
#include "mixlab/brl/brl_reference.h"
#include "mixlab/resolvent/resolvent.h"
#include "mixlab/scan/affine.h"
#include "mixlab/scan/selective_scan.h"
#include "mixlab/toeplitz/toeplitz.h"

namespace mixlab::testing {

// ---- Shape -----------------------------------------------------------------------------------

Shape::Shape(const char* spec) : Shape(std::string(spec)) {}

Shape::Shape(const std::string& spec) {
  size_t i = 0;
  auto bad = [&] {
    throw std::invalid_argument("Shape: expected 'B2 H3 T33 ...' (letters then a number), got '" + spec + "'");
  };
  while (i < spec.size()) {
    if (spec[i] == ' ') {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < spec.size() && std::isalpha(static_cast<unsigned char>(spec[i]))) ++i;
    std::string name = spec.substr(start, i - start);
    size_t digits = i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) ++i;
    if (name.empty() || digits == i || has(name)) bad();
    sizes_.emplace_back(name, std::stoll(spec.substr(digits, i - digits)));
  }
}

bool Shape::has(const std::string& name) const {
  for (const auto& [n, v] : sizes_)
    if (n == name) return true;
  return false;
}

int64_t Shape::operator[](const std::string& name) const {
  for (const auto& [n, v] : sizes_)
    if (n == name) return v;
  throw std::out_of_range("Shape " + label() + " has no size '" + name + "'");
}

std::string Shape::label() const {
  std::string s;
  for (const auto& [n, v] : sizes_) s += (s.empty() ? "" : "_") + n + std::to_string(v);
  return s;
}

std::shared_ptr<void> enter_fast_scope(const KernelCase& row, const Shape& shape) {
  return row.fast_scope ? row.fast_scope(shape) : nullptr;
}

uint64_t kernel_seed(const std::string& row, const std::string& shape_label) {
  uint64_t h = 1469598103934665603ull;
  for (char c : row + "/" + shape_label) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h % (uint64_t{1} << 31);
}

const std::vector<std::string> kRequiredKernels = {
    "resolvent",  "resolvent_plain_loops", "resolvent_dense_blocks", "selective_scan",   "diag_decay",
    "delta_rule", "gated_delta_rule",      "toeplitz_fft",           "causal_attention", "windowed_attention",
    "brl",        "block_attention",
};

namespace {

using torch::Tensor;

torch::TensorOptions opts(torch::ScalarType dtype) { return torch::TensorOptions().dtype(dtype); }

// ---- Resolvent op (tests/resolvent/resolvent_op_test.cpp, resolvent_row_kernels_test.cpp) ----
// alpha (B,H,T,W+1), beta (B,H,T,W or 0), x (B,H,T,D) strided, gate (B,H,T,D) in [0,1]; beta rows
// sum to < 0.9 so the recurrence stays O(1). Tolerances: resolvent_op_test (double: 1e-9/1e-10
// forward, 1e-8/1e-9 gradients; float forward 1e-4). The float gradients are not compared there;
// 1e-4 / 1e-4, the float forward's, holds them here.

enum class ResolventPath { kRegister, kPlainLoops, kDenseBlocks };

KernelCase resolvent_row(const std::string& name, const std::string& spec, bool gated, ResolventPath path,
                         std::vector<Shape> grid, Shape gradcheck_shape, std::vector<Shape> bench) {
  const Pattern pattern = Pattern::parse(spec);
  KernelCase row;
  row.name = name;
  row.kernel = path == ResolventPath::kRegister     ? "resolvent"
               : path == ResolventPath::kPlainLoops ? "resolvent_plain_loops"
                                                    : "resolvent_dense_blocks";
  row.what = std::string("resolvent_forward over ") + spec + (gated ? ", gated, " : ", ") +
             (path == ResolventPath::kRegister     ? "register kernel where D % 16 == 0 (plain loops otherwise)"
              : path == ResolventPath::kPlainLoops ? "under ResolventPlainLoopsGuard"
                                                   : "BLAS-3 block solve (min_width 8, blocks of 5 rows)") +
             " vs resolvent_reference (dense triangular solve)";
  row.input_names = {"alpha", "beta", "x"};
  if (gated) row.input_names.push_back("gate");
  row.grad_inputs = {0, 2};
  if (pattern.recurrent()) row.grad_inputs.insert(row.grad_inputs.begin() + 1, 1);
  if (gated) row.grad_inputs.push_back(3);
  row.make_inputs = [pattern, gated](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], H = s["H"], T = s["T"], D = s["D"];
    const int64_t W = pattern_index(pattern, T)->W, WB = pattern.recurrent() ? W : 0;
    KernelInputs in;
    in.shape = s;
    in.tensors = {torch::randn({B, H, T, W + 1}, opts(dtype)),
                  torch::rand({B, H, T, WB}, opts(dtype)) * (0.9 / std::max<int64_t>(W, 1)),
                  torch::randn({B, T, H, D}, opts(dtype)).permute({0, 2, 1, 3})};
    if (gated) in.tensors.push_back(torch::rand({B, H, T, D}, opts(dtype)));
    return in;
  };
  auto gate_of = [gated](const KernelInputs& in) { return gated ? in.tensors[3] : Tensor(); };
  row.fast = [pattern, gate_of](const KernelInputs& in) -> Tensors {
    return {resolvent_forward(in.tensors[0], in.tensors[1], in.tensors[2], pattern, gate_of(in))};
  };
  row.reference = [pattern, gate_of](const KernelInputs& in) -> Tensors {
    return {resolvent_reference(in.tensors[0], in.tensors[1], in.tensors[2], pattern, gate_of(in))};
  };
  if (path == ResolventPath::kPlainLoops) {
    row.fast_scope = [](const Shape&) { return std::make_shared<ResolventPlainLoopsGuard>(); };
  } else if (path == ResolventPath::kDenseBlocks) {
    // As tests/resolvent/resolvent_op_test.cpp (ResolventDenseBlocks): min_width 8 reaches the
    // block solve at test sizes (from T = 9), the shape's R sets the rows per block (5 in the
    // grid: partial last blocks; the default 128 in the benchmark). The backward reads the
    // tuning too: the scope is held over it.
    row.fast_scope = [](const Shape& s) {
      return std::make_shared<ResolventDenseBlocksScope>(ResolventDenseBlocks{8, s["R"]});
    };
  }
  row.grid = std::move(grid);
  row.gradcheck_shape = std::move(gradcheck_shape);
  row.bench_shapes = std::move(bench);
  row.forward_f32 = {1e-4, 1e-4};
  row.backward_f32 = {1e-4, 1e-4};
  row.forward_f64 = {1e-9, 1e-10};
  row.backward_f64 = {1e-8, 1e-9};
  return row;
}

// ---- Selective scan (tests/scan/selective_scan_test.cpp) --------------------------------------
// u (B,T,C), delta = softplus(randn)/2 > 0, a = -exp(randn/2) < 0 (C,N), b, c (B,T,N), d (C).
// Tolerances: float 2e-5 forward, 10x for gradients; double 1e-11, 10x.

KernelCase selective_scan_row() {
  KernelCase row;
  row.name = "selective_scan";
  row.kernel = "selective_scan";
  row.what = "selective_scan (fused lanes) vs selective_scan_reference ((B,T,C,N) tensors, loop over t)";
  row.input_names = {"u", "delta", "a", "b", "c", "d"};
  row.grad_inputs = {0, 1, 2, 3, 4, 5};
  row.make_inputs = [](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], T = s["T"], C = s["C"], N = s["N"];
    const auto o = opts(dtype);
    KernelInputs in;
    in.shape = s;
    in.tensors = {torch::randn({B, T, C}, o),
                  torch::softplus(torch::randn({B, T, C}, o)) * 0.5,
                  -torch::exp(torch::randn({C, N}, o) * 0.5),
                  torch::randn({B, T, N}, o),
                  torch::randn({B, T, N}, o),
                  torch::randn({C}, o)};
    return in;
  };
  row.fast = [](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    return {selective_scan(t[0], t[1], t[2], t[3], t[4], t[5])};
  };
  row.reference = [](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    return {selective_scan_reference(t[0], t[1], t[2], t[3], t[4], t[5])};
  };
  row.grid = {"B1 T1 C1 N1", "B2 T7 C5 N3", "B1 T33 C20 N16", "B2 T79 C3 N5"};
  row.gradcheck_shape = "B2 T5 C3 N2";
  row.bench_shapes = {"B8 T256 C64 N16"};
  row.forward_f32 = {2e-5, 2e-5};
  row.backward_f32 = {2e-4, 2e-4};
  row.forward_f64 = {1e-11, 1e-11};
  row.backward_f64 = {1e-10, 1e-10};
  return row;
}

// ---- Fused affine kernels (tests/scan/affine_fused_test.cpp, affine_kernel_test.cpp) ----------
// q, k, v non-contiguous ((B,T,H,D) transposed), k scaled by 1/sqrt(Dk) (diagonal decay) or
// L2-normalised (delta rule), an initial state; log decays strictly negative (a finite
// difference must not push one above 0), beta inside (0, 2). Outputs: out and the final state.
// chunk 16: T = 33 and 79 leave partial chunks.
// Tolerances: double 1e-9 (affine_kernel_test, every form vs the reference, forward and
// gradients); float 2e-4 forward (affine_fused_test vs the reference), 2e-4 gradients for the
// diagonal decay and 5e-4 for the delta rule (affine_fused_test vs the composition).

constexpr int64_t kAffineChunk = 16;

Tensor qkv_layout(const Shape& s, int64_t width, torch::ScalarType dtype) {
  return torch::randn({s["B"], s["T"], s["H"], width}, opts(dtype)).transpose(1, 2);
}

// scalar_gate: the log decay is one value per (b,h,t), passed expanded over Dk (the input is its
// (B,H,T,1) leaf), as RetNet / mLSTM / gated RFA pass it.
KernelCase diag_decay_row(bool scalar_gate) {
  KernelCase row;
  row.name = scalar_gate ? "diag_decay_scalar_gate" : "diag_decay";
  row.kernel = "diag_decay";
  row.what = std::string("diag_decay_chunked (fused, chunk 16), ") +
             (scalar_gate ? "scalar gate expanded over Dk" : "gate per key") +
             " vs diag_decay_reference (loop per (b,h,t), dense E_t)";
  row.input_names = {"q", "k", "v", scalar_gate ? "g (B,H,T,1)" : "g", "initial_state"};
  row.grad_inputs = {0, 1, 2, 3, 4};
  row.make_inputs = [scalar_gate](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], H = s["H"], T = s["T"], Dk = s["Dk"], Dv = s["Dv"];
    KernelInputs in;
    in.shape = s;
    in.tensors = {qkv_layout(s, Dk, dtype), qkv_layout(s, Dk, dtype) / std::sqrt(static_cast<double>(Dk)),
                  qkv_layout(s, Dv, dtype), -(0.05 + torch::rand({B, H, T, scalar_gate ? 1 : Dk}, opts(dtype))),
                  torch::randn({B, H, Dk, Dv}, opts(dtype))};
    return in;
  };
  auto gate = [](const KernelInputs& in) { return in.tensors[3].expand({-1, -1, -1, in.tensors[0].size(3)}); };
  row.fast = [gate](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    auto r = diag_decay_chunked(t[0], t[1], t[2], gate(in), t[4], kAffineChunk);
    return {r.out, r.final_state};
  };
  row.reference = [gate](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    auto r = diag_decay_reference(t[0], t[1], t[2], gate(in), t[4]);
    return {r.out, r.final_state};
  };
  row.grid = {"B1 H1 T1 Dk1 Dv1", "B2 H3 T7 Dk5 Dv3", "B1 H3 T33 Dk16 Dv19", "B2 H1 T79 Dk4 Dv9"};
  row.gradcheck_shape = "B1 H2 T5 Dk3 Dv2";
  row.bench_shapes = {"B1 H4 T256 Dk32 Dv32"};
  row.forward_f32 = {2e-4, 2e-4};
  row.backward_f32 = {2e-4, 2e-4};
  row.forward_f64 = {1e-9, 1e-9};
  row.backward_f64 = {1e-9, 1e-9};
  return row;
}

KernelCase delta_rule_row(bool gated) {
  KernelCase row;
  row.name = gated ? "gated_delta_rule" : "delta_rule";
  row.kernel = row.name;
  row.what = std::string("delta_rule_chunked (fused, chunk 16)") + (gated ? " with log_alpha (gated DeltaNet)" : "") +
             " vs delta_rule_reference (loop per (b,h,t), dense E_t)";
  row.input_names = {"q", "k", "v", "beta"};
  if (gated) row.input_names.push_back("log_alpha");
  row.input_names.push_back("initial_state");
  for (size_t i = 0; i < row.input_names.size(); ++i) row.grad_inputs.push_back(i);
  row.make_inputs = [gated](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], H = s["H"], T = s["T"], Dk = s["Dk"], Dv = s["Dv"];
    auto k = torch::randn({B, T, H, Dk}, opts(dtype));
    KernelInputs in;
    in.shape = s;
    in.tensors = {qkv_layout(s, Dk, dtype), (k / (k.norm(2, -1, true) + 1e-6)).transpose(1, 2),
                  qkv_layout(s, Dv, dtype), 0.1 + 1.8 * torch::rand({B, H, T}, opts(dtype))};
    if (gated) in.tensors.push_back(-(0.05 + 0.5 * torch::rand({B, H, T}, opts(dtype))));
    in.tensors.push_back(torch::randn({B, H, Dk, Dv}, opts(dtype)));
    return in;
  };
  row.fast = [gated](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    auto r = delta_rule_chunked(t[0], t[1], t[2], t[3], gated ? t[4] : Tensor(), t.back(), kAffineChunk);
    return {r.out, r.final_state};
  };
  row.reference = [gated](const KernelInputs& in) -> Tensors {
    const auto& t = in.tensors;
    auto r = delta_rule_reference(t[0], t[1], t[2], t[3], gated ? t[4] : Tensor(), t.back());
    return {r.out, r.final_state};
  };
  row.grid = {"B1 H1 T1 Dk1 Dv1", "B2 H3 T7 Dk5 Dv3", "B1 H3 T33 Dk16 Dv19", "B2 H1 T79 Dk4 Dv9"};
  row.gradcheck_shape = "B1 H2 T5 Dk3 Dv2";
  row.bench_shapes = {"B1 H4 T256 Dk32 Dv32"};
  row.forward_f32 = {2e-4, 2e-4};
  row.backward_f32 = {5e-4, 5e-4};
  row.forward_f64 = {1e-9, 1e-9};
  row.backward_f64 = {1e-8, 1e-8};
  return row;
}

// ---- Toeplitz FFT (tests/toeplitz/toeplitz_op_test.cpp, toeplitz_fft_native_test.cpp) ---------
// t (H,T+3) lags, x (B,H,T,D) strided ((B,T,H,D) permuted, as the mixer delivers it), bias
// (H,T+3). The loop reference has no autograd: its explicit backward (toeplitz_reference_backward)
// is wrapped as one here. Tolerances: toeplitz_op_test, float forward 2e-5 sqrt(T) + 1e-5 (2e-4
// up to T = 79), float gradients 1e-4 / 1e-3 (dt sums B T D products), double 1e-9.

struct ToeplitzReference : torch::autograd::Function<ToeplitzReference> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& t, const Tensor& x, const Tensor& bias) {
    ctx->save_for_backward({t, x, bias});
    return toeplitz_reference_forward(t, x, bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    auto g = toeplitz_reference_backward(saved[0], saved[1], saved[2], grad[0].contiguous());
    return {g.dt, g.dx, g.dbias};
  }
};

KernelCase toeplitz_row() {
  KernelCase row;
  row.name = "toeplitz_fft";
  row.kernel = "toeplitz_fft";
  row.what = "toeplitz_forward, path kFft (native FFT kernel) vs toeplitz_reference_forward/backward (loops)";
  row.input_names = {"t", "x", "bias"};
  row.grad_inputs = {0, 1, 2};
  row.make_inputs = [](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], H = s["H"], T = s["T"], D = s["D"];
    KernelInputs in;
    in.shape = s;
    in.tensors = {torch::randn({H, T + 3}, opts(dtype)), torch::randn({B, T, H, D}, opts(dtype)).permute({0, 2, 1, 3}),
                  torch::randn({H, T + 3}, opts(dtype))};
    return in;
  };
  row.fast = [](const KernelInputs& in) -> Tensors {
    return {toeplitz_forward(in.tensors[0], in.tensors[1], in.tensors[2], ToeplitzPath::kFft)};
  };
  row.reference = [](const KernelInputs& in) -> Tensors {
    return {ToeplitzReference::apply(in.tensors[0], in.tensors[1], in.tensors[2])};
  };
  row.grid = {"B1 H1 T1 D1", "B2 H3 T7 D2", "B1 H2 T33 D31", "B2 H3 T79 D16"};
  row.gradcheck_shape = "B1 H2 T6 D3";
  row.bench_shapes = {"B1 H2 T512 D32"};
  row.forward_f32 = {2e-4, 2e-4};
  row.backward_f32 = {1e-4, 1e-3};
  row.forward_f64 = {1e-9, 1e-9};
  row.backward_f64 = {1e-9, 1e-9};
  return row;
}

// ---- Causal attention (tests/attention/causal_attention_test.cpp) ------------------------------
// q (B,H,T,D), k, v (B,H,S+T,D): views of one (B,S+T,3,H,D) projection as the mixer makes them,
// q the last T positions. The reference is the definition written out: (T, S+T) scores, -inf
// above the diagonal and (window W) before S+i-W, softmax, product. D a multiple of 4 so the
// native kernel runs in float and double: whole 64-byte vectors, and D 4, 8, 12 and 24 in the
// narrower ones (MAD's model has D 8). Tolerances: 3e-5 float, 1e-11 double (native vs
// composed, forward and the three gradients).

Tensors attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  const int64_t T = q.size(2), S = k.size(2) - T, D = q.size(3);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));
  auto i = torch::arange(T).unsqueeze(1) + S, j = torch::arange(S + T).unsqueeze(0);
  auto masked = j > i;
  if (window > 0) masked = masked.logical_or(j < i - window);
  return {torch::matmul(scores.masked_fill(masked, -std::numeric_limits<double>::infinity()).softmax(-1), v)};
}

KernelCase attention_row(bool windowed) {
  KernelCase row;
  row.name = windowed ? "windowed_attention" : "causal_attention";
  row.kernel = row.name;
  row.what = std::string("causal_attention (native blocked kernel") + (windowed ? ", window W" : "") +
             ") vs softmax(QK^T/sqrt(D) + mask) V written out";
  row.input_names = {"q", "k", "v"};
  row.grad_inputs = {0, 1, 2};
  row.make_inputs = [](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t B = s["B"], H = s["H"], T = s["T"], S = s["S"], D = s["D"];
    auto qkv = torch::randn({B, S + T, 3, H, D}, opts(dtype)).permute({2, 0, 3, 1, 4});
    KernelInputs in;
    in.shape = s;
    in.tensors = {qkv[0].narrow(2, S, T), qkv[1], qkv[2]};
    return in;
  };
  auto window = [windowed](const KernelInputs& in) { return windowed ? in.shape["W"] : int64_t{0}; };
  row.fast = [window](const KernelInputs& in) -> Tensors {
    return {causal_attention(in.tensors[0], in.tensors[1], in.tensors[2], window(in))};
  };
  row.reference = [window](const KernelInputs& in) -> Tensors {
    return attention_reference(in.tensors[0], in.tensors[1], in.tensors[2], window(in));
  };
  if (windowed) {
    // Windows below, inside and across the 32-row query / 64-key blocks, with cached positions.
    row.grid = {"B1 H1 T1 S0 D16 W1",   "B2 H3 T7 S0 D16 W3", "B1 H3 T33 S5 D32 W8", "B2 H1 T79 S0 D64 W40",
                "B1 H1 T79 S3 D16 W70", "B2 H4 T40 S0 D8 W8", "B1 H2 T33 S3 D12 W5"};
    row.gradcheck_shape = "B1 H2 T6 S3 D8 W2";
    row.bench_shapes = {"B1 H4 T1024 S0 D64 W128"};
  } else {
    row.grid = {"B1 H1 T1 S0 D16", "B2 H3 T7 S0 D16", "B1 H3 T33 S5 D32", "B2 H1 T79 S0 D64",
                "B2 H4 T40 S0 D8", "B1 H2 T33 S3 D4", "B1 H1 T50 S0 D24"};
    row.gradcheck_shape = "B1 H2 T5 S3 D8";
    row.bench_shapes = {"B1 H4 T512 S0 D64"};
  }
  row.forward_f32 = row.backward_f32 = {3e-5, 3e-5};
  row.forward_f64 = row.backward_f64 = {1e-11, 1e-11};
  return row;
}

// ---- BRL-Attention (tests/brl/brl_test.cpp) ----------------------------------------------------
// BrlMixer (C, H; w = W, m = M, block = N) built from the seed, x (B,T,C), memory (B,K,M,C) with
// K = ceil(T/N). Outputs y and the memory delta; gradients w.r.t. x and memory (the parameters'
// are brl_test's). C/H = 16 (T33) takes the native windowed attention under F_gen. Tolerances:
// brl_test, double 1e-9/1e-10 forward and 1e-8/1e-10 gradients; float (not compared there)
// 1e-4/1e-5, brl_test's float tolerance of decode against forward.

std::shared_ptr<BrlMixer> brl_mixer(const Shape& s, torch::ScalarType dtype) {
  MixerDims dims;
  dims.d_model = s["C"];
  dims.n_heads = s["H"];
  dims.max_len = std::max<int64_t>(512, s["T"]);
  BrlOptions o;
  o.window = s["W"];
  o.slots = s["M"];
  o.block = s["N"];
  auto m = std::make_shared<BrlMixer>(dims, o);
  m->to(dtype);
  return m;
}

KernelCase brl_row() {
  KernelCase row;
  row.name = "brl";
  row.kernel = "brl";
  row.what = "BrlMixer::forward_memory vs brl_reference_forward (dense banded attention, loops over blocks/heads)";
  row.input_names = {"x", "memory"};
  row.grad_inputs = {0, 1};
  row.make_inputs = [](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    KernelInputs in;
    in.shape = s;
    auto mixer = brl_mixer(s, dtype);
    const int64_t B = s["B"], T = s["T"], C = s["C"];
    in.tensors = {torch::randn({B, T, C}, opts(dtype)),
                  torch::randn({B, mixer->blocks_for(T), s["M"], C}, opts(dtype))};
    in.module = mixer;
    return in;
  };
  row.fast = [](const KernelInputs& in) -> Tensors {
    auto out = static_cast<BrlMixer&>(*in.module).forward_memory(in.tensors[0], in.tensors[1]);
    return {out.y, out.memory_delta};
  };
  row.reference = [](const KernelInputs& in) -> Tensors {
    auto out = brl_reference_forward(static_cast<BrlMixer&>(*in.module), in.tensors[0], in.tensors[1]);
    return {out.y, out.memory_delta};
  };
  row.grid = {"B1 T1 C8 H2 W3 M3 N4", "B2 T7 C12 H3 W3 M2 N4", "B2 T33 C32 H2 W5 M3 N8"};
  row.gradcheck_shape = "B1 T7 C8 H2 W2 M2 N3";
  row.bench_shapes = {"B1 T256 C64 H4 W16 M8 N16"};
  row.forward_f32 = {1e-4, 1e-5};
  row.backward_f32 = {1e-4, 1e-5};
  row.forward_f64 = {1e-9, 1e-10};
  row.backward_f64 = {1e-8, 1e-10};
  return row;
}

// ---- block attention, BRL's and the T-PSM's (tests/attention/block_attention_test.cpp) --------
// q (G,T,H,D) (T: the queries of a group), k, v (G,K,H,D) as views of linear outputs (G,L,H·D);
// every key, no mask. The reference is the definition written out per head: softmax(scale q k^T)
// v. Lk 1 (one compressed token), odd D, groups of one. Tolerances: block_attention_test's.

KernelCase block_attention_row() {
  KernelCase row;
  row.name = "block_attention";
  row.kernel = "block_attention";
  row.what = "block_attention (native, per group and head) vs softmax(scale QK^T) V written out";
  row.input_names = {"q", "k", "v"};
  row.grad_inputs = {0, 1, 2};
  row.make_inputs = [](const Shape& s, torch::ScalarType dtype, uint64_t seed) {
    torch::manual_seed(seed);
    const int64_t G = s["G"], Q = s["T"], K = s["K"], H = s["H"], D = s["D"];
    KernelInputs in;
    in.shape = s;
    in.tensors = {torch::randn({G, Q, H * D}, opts(dtype)).view({G, Q, H, D}),
                  torch::randn({G, K, H * D}, opts(dtype)).view({G, K, H, D}),
                  torch::randn({G, K, H * D}, opts(dtype)).view({G, K, H, D})};
    return in;
  };
  auto scale = [](const KernelInputs& in) { return 1.0 / std::sqrt(static_cast<double>(in.shape["D"])); };
  row.fast = [scale](const KernelInputs& in) -> Tensors {
    return {block_attention(in.tensors[0], in.tensors[1], in.tensors[2], scale(in))};
  };
  row.reference = [scale](const KernelInputs& in) -> Tensors {
    auto q = in.tensors[0].transpose(1, 2), k = in.tensors[1].transpose(1, 2), v = in.tensors[2].transpose(1, 2);
    auto p = (torch::matmul(q, k.transpose(-1, -2)) * scale(in)).softmax(-1);
    return {torch::matmul(p, v).transpose(1, 2)};
  };
  row.grid = {"G1 T1 K1 H1 D1", "G3 T7 K2 H2 D5", "G2 T16 K8 H3 D16", "G5 T33 K3 H2 D17"};
  row.gradcheck_shape = "G2 T3 K2 H2 D3";
  row.bench_shapes = {"G64 T64 K16 H4 D16"};
  row.forward_f32 = row.backward_f32 = {3e-5, 3e-5};
  row.forward_f64 = row.backward_f64 = {1e-11, 1e-11};
  return row;
}

std::vector<KernelCase> build_table() {
  // Resolvent grids: D a multiple of 16 (the register kernel) and an odd D (the plain loops), T = 1,
  // odd, not a multiple of the 64-row blocks.
  std::vector<KernelCase> rows;
  rows.push_back(resolvent_row("resolvent_pow2", "pow2", false, ResolventPath::kRegister,
                               {"B1 H1 T1 D16", "B2 H3 T7 D16", "B1 H3 T33 D33", "B2 H1 T79 D32", "B1 H2 T79 D7"},
                               "B1 H2 T9 D3", {"B1 H4 T512 D64"}));
  rows.push_back(resolvent_row("resolvent_square_cache_gated", "square+cache", true, ResolventPath::kRegister,
                               {"B1 H1 T1 D16", "B2 H3 T7 D7", "B1 H3 T33 D16", "B2 H1 T79 D33"}, "B1 H2 T9 D3",
                               {"B1 H2 T256 D32"}));
  rows.push_back(resolvent_row("resolvent_band4", "band:4", false, ResolventPath::kRegister,
                               {"B1 H1 T1 D16", "B2 H3 T7 D5", "B1 H3 T33 D32", "B2 H1 T79 D9"}, "B1 H2 T9 D3",
                               {"B1 H4 T512 D64"}));
  rows.push_back(resolvent_row("resolvent_plain_loops_pow2_gated", "pow2", true, ResolventPath::kPlainLoops,
                               {"B1 H1 T1 D16", "B2 H3 T7 D16", "B1 H3 T33 D32", "B2 H1 T79 D16"}, "B1 H1 T9 D8",
                               {"B1 H2 T256 D32"}));
  rows.push_back(resolvent_row("resolvent_dense_blocks_gated", "dense", true, ResolventPath::kDenseBlocks,
                               {"B1 H1 T1 D16 R5", "B2 H3 T9 D1 R5", "B1 H3 T33 D16 R5", "B2 H1 T41 D7 R5"},
                               "B1 H2 T10 D3 R3", {"B1 H2 T256 D32 R128"}));
  rows.push_back(selective_scan_row());
  rows.push_back(diag_decay_row(false));
  rows.push_back(diag_decay_row(true));
  rows.push_back(delta_rule_row(false));
  rows.push_back(delta_rule_row(true));
  rows.push_back(toeplitz_row());
  rows.push_back(attention_row(false));
  rows.push_back(attention_row(true));
  rows.push_back(brl_row());
  rows.push_back(block_attention_row());
  return rows;
}

}  // namespace

const std::vector<KernelCase>& kernel_table() {
  static const std::vector<KernelCase> table = build_table();
  return table;
}

}  // namespace mixlab::testing
