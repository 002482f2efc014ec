// python/mixlab_py.cpp — the compiled half of the Python package `mixlab` (module mixlab._mixlab).
//
// A thin boundary, no kernels: every function forwards to the C++ entry point of the same
// concept (resolvent_forward, Pattern, analyze_pattern, mixer_create, the chunked affine kernels,
// toeplitz_forward). Tensors cross as torch tensors through torch's own pybind11 casters
// (libtorch_python), so no copies are made and the autograd graph the C++ ops record is the one
// Python's loss.backward() runs. Argument checks stay where they are in C++; mixlab::Error
// becomes mixlab.Error (a ValueError) carrying the C++ message unchanged.
//
// The GIL is released around every call into C++ (after arguments are converted), so other
// Python threads, and torch's autograd/DDP hooks, are not blocked by a long kernel.
//
// What this is not: the user-facing module. python/mixlab/__init__.py wraps mixers in a
// torch.nn.Module whose parameters are the C++ module's own tensors; import `mixlab`, not
// `mixlab._mixlab`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/python.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "mixlab/analysis/analyze.h"
#include "mixlab/analysis/design.h"
#include "mixlab/attention/causal_attention.h"
#include "mixlab/core/blas_info.h"
#include "mixlab/core/cpu_block_cache.h"
#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/mixer/mixer.h"
#include "mixlab/pattern/pattern.h"
#include "mixlab/registry/layer_specs.h"
#include "mixlab/registry/registry.h"
#include "mixlab/resolvent/resolvent.h"
#include "mixlab/scan/affine.h"
#include "mixlab/scan/selective_scan.h"
#include "mixlab/toeplitz/toeplitz.h"

namespace py = pybind11;
using mixlab::Pattern;

namespace {

using OptTensor = std::optional<at::Tensor>;

at::Tensor value_or_undefined(const OptTensor& t) { return t ? *t : at::Tensor(); }

// A pattern argument is a mixlab.Pattern or its spec string; a bad spec raises mixlab.Error
// with Pattern::parse's message (pybind11's implicit conversions would swallow it).
Pattern pattern_arg(const py::handle& h, const char* function) {
  if (py::isinstance<py::str>(h)) return Pattern::parse(h.cast<std::string>());
  MIXLAB_CHECK(py::isinstance<Pattern>(h), "{}: pattern must be a mixlab.Pattern or a spec string, got {}", function,
               std::string(py::str(h.get_type().attr("__name__"))));
  return h.cast<Pattern>();
}

mixlab::ToeplitzPath toeplitz_path_arg(const std::string& path) {
  if (path == "auto") return mixlab::ToeplitzPath::kAuto;
  if (path == "fft") return mixlab::ToeplitzPath::kFft;
  if (path == "materialized") return mixlab::ToeplitzPath::kMaterialized;
  MIXLAB_FAIL("toeplitz: path must be 'auto', 'fft' or 'materialized', got '{}'", path);
}

// Upper bounds of the size-like ints a Python caller passes, checked before anything is allocated
// (a batch of 2^62 would overflow torch's size arithmetic; one of 2^40 asks the allocator for
// terabytes): generous for real use, far below overflow (issue 37 item 3, tests/python/test_hostile.py).
constexpr int64_t kMaxBatch = int64_t{1} << 24;
constexpr int64_t kMaxDModel = int64_t{1} << 20;
constexpr int64_t kMaxLayers = int64_t{1} << 20;
constexpr int64_t kMaxCacheMb = int64_t{1} << 40;  // MiB; times 2^20 still fits int64

void check_mixer_dims(const char* fn, int64_t d_model, int64_t n_heads, int64_t max_len) {
  MIXLAB_CHECK(d_model >= 1 && d_model <= kMaxDModel, "{}: d_model must be in [1, {}], got {}", fn, kMaxDModel,
               d_model);
  MIXLAB_CHECK(n_heads >= 1 && n_heads <= d_model, "{}: n_heads must be in [1, d_model = {}], got {}", fn, d_model,
               n_heads);
  MIXLAB_CHECK(max_len >= 1 && max_len <= mixlab::kPatternMaxT, "{}: max_len must be in [1, {}], got {}", fn,
               mixlab::kPatternMaxT, max_len);
}

// What every mixer's forward/step/prefill needs of its input, checked once at the boundary: not
// every family checks dtype and device before torch's own ops, whose errors name no argument
// (and one family converted float16 silently). `rank` 3 is x (B,T,C), 2 is x_t (B,C); C is left to
// the family, which knows its width.
void check_mixer_input(mixlab::Mixer& mx, const char* fn, const char* name, const at::Tensor& x, int64_t rank) {
  mixlab::check_dim(fn, name, x, rank, rank == 3 ? "(B,T,C)" : "(B,C)");
  mixlab::check_floating(fn, name, x);
  mixlab::check_cpu(fn, name, x);
  for (int64_t d = 0; d < rank; ++d)
    MIXLAB_CHECK(x.size(d) >= 1, "{}: {} must have every size >= 1 {}, got {}", fn, name,
                 rank == 3 ? "(B,T,C)" : "(B,C)", mixlab::shape_string(x));
  const auto params = mx.parameters(/*recurse=*/true);
  if (!params.empty()) mixlab::check_same_dtype(fn, name, x, "the mixer's weights", params.front());
}

// A state of another mixer (or of other dims) would be written under this mixer's spec, a file
// that fails only when loaded: read its fields into a fresh state of this mixer first (what fork
// does; it refuses a foreign state naming the field that differs).
void check_own_state(mixlab::Mixer& mx, const mixlab::MixerState& state, const char* fn) {
  try {
    mx.fork(state);
  } catch (const mixlab::Error& e) {
    MIXLAB_FAIL("{}: state was not made by this mixer ('{}') or one of its dims: {}", fn, mx.spec(), e.what());
  }
}

py::tuple affine_tuple(mixlab::AffineResult r) { return py::make_tuple(std::move(r.out), std::move(r.final_state)); }

void bind_errors(py::module_& m) {
  // mixlab.Error subclasses ValueError: a caller error (bad shape, spec, argument), message as in C++.
  py::register_exception<mixlab::Error>(m, "Error", PyExc_ValueError);
  // A broken invariant of mixlab itself (a bug): RuntimeError subclass, file:line in the message.
  py::register_exception<mixlab::InternalError>(m, "InternalError", PyExc_RuntimeError);
}

void bind_pattern(py::module_& m) {
  py::class_<Pattern>(m, "Pattern", R"doc(
A sparsity pattern of Y = (I - B)^-1 A X: for each row i (0-based) the past positions P(i) it reads.

Pattern(spec) parses a spec string: causal, band:W, dense, order:K, pow2, square, linear,
offsets:1,2,3,5, geom:B, power:P, fib, ruler:L, a union such as band:8+pow2, optionally with +cache
(cache-efficient variant). A bad spec raises mixlab.Error.
)doc")
      .def(py::init(&Pattern::parse), py::arg("spec"))
      .def_property_readonly("spec", &Pattern::spec, "The canonical spec string (round-trips through Pattern).")
      .def_property_readonly("recurrent", &Pattern::recurrent,
                             "False for causal and band:W (B = 0: rows never read past outputs).")
      .def_property_readonly("translation_invariant", &Pattern::translation_invariant,
                             "True when every row reads the same offsets (not for +cache variants).")
      .def_property_readonly("cache_efficient", &Pattern::cache_efficient, "True for the +cache variants.")
      .def_property_readonly("structure", &Pattern::structure_name, "Structure name (seed 000 Table 1 wording).")
      .def_property_readonly("time_class", &Pattern::time_class, "Asymptotic cost per token, e.g. 'O(log2 n)'.")
      .def_property_readonly("cache_class", &Pattern::cache_class, "Asymptotic decode cache, e.g. 'O(n)'.")
      .def(
          "row",
          [](const Pattern& p, int64_t i) {
            MIXLAB_CHECK(i >= 0 && i < mixlab::kPatternMaxT, "Pattern.row: i must be in [0, {}), got {}",
                         mixlab::kPatternMaxT, i);
            return p.row(i);
          },
          py::arg("i"), "Past positions P(i) of row i (0-based), nearest first.")
      .def(
          "rows",
          [](const Pattern& p, int64_t T) {
            MIXLAB_CHECK(T >= 1 && T <= mixlab::kPatternMaxT, "Pattern.rows: T must be in [1, {}], got {}",
                         mixlab::kPatternMaxT, T);
            std::vector<std::vector<int64_t>> rows;
            rows.reserve(static_cast<size_t>(T));
            for (int64_t i = 0; i < T; ++i) rows.push_back(p.row(i));
            return rows;
          },
          py::arg("T"), "P(i) for every row i < T: a list of T lists, nearest first.")
      .def(
          "offsets",
          [](const Pattern& p, int64_t max_offset) {
            MIXLAB_CHECK(max_offset >= 1 && max_offset <= mixlab::kPatternMaxT,
                         "Pattern.offsets: max_offset must be in [1, {}], got {}", mixlab::kPatternMaxT, max_offset);
            return p.offsets_upto(max_offset);
          },
          py::arg("max_offset"),
          "The offsets f(0) < f(1) < ... that are <= max_offset (the plain pattern's; +cache rounds them).")
      .def(
          "row_size",
          [](const Pattern& p, int64_t i) {
            MIXLAB_CHECK(i >= 0 && i < mixlab::kPatternMaxT, "Pattern.row_size: i must be in [0, {}), got {}",
                         mixlab::kPatternMaxT, i);
            return p.row_size(i);
          },
          py::arg("i"), "|P(i)| without building the row.")
      .def(
          "max_width",
          [](const Pattern& p, int64_t T) {
            MIXLAB_CHECK(T >= 1 && T <= mixlab::kPatternMaxT, "Pattern.max_width: T must be in [1, {}], got {}",
                         mixlab::kPatternMaxT, T);
            return mixlab::resolvent_width(p, T);
          },
          py::arg("T"),
          "W = max |P(i)| over i < T: beta of mixlab.resolvent has W slots, alpha W + 1 (A diagonal first).")
      .def("__repr__", [](const Pattern& p) { return "mixlab.Pattern('" + p.spec() + "')"; })
      .def("__eq__", [](const Pattern& a, const Pattern& b) { return a.spec() == b.spec(); });

  m.def(
      "analyze",
      [](const std::string& spec, int64_t T, bool exact_congestion) {
        Pattern p = Pattern::parse(spec);
        MIXLAB_CHECK(T >= 1 && T <= mixlab::kAnalysisMaxT, "analyze: T must be in [1, {}], got {}",
                     mixlab::kAnalysisMaxT, T);
        mixlab::AnalyzeOptions opt;
        opt.exact_congestion = exact_congestion;
        std::string text;
        {
          py::gil_scoped_release release;
          text = mixlab::analysis_report_json(mixlab::analyze_pattern(p, T, opt)).dump();
        }
        return py::module_::import("json").attr("loads")(text);
      },
      py::arg("spec"), py::arg("T"), py::arg("exact_congestion") = false, R"doc(
Measures a pattern exactly at length T: the dict `mixlab analyze --pattern SPEC --T T --json` prints
(cost, cache, shortest paths, congestion; positions 0-based). exact_congestion=True also solves the
congestion integer program (GLPK) when T/2 is small, like --exact-congestion.
)doc");

  m.def(
      "design",
      [](int64_t T, std::optional<int64_t> max_time, std::optional<int64_t> max_cache, std::optional<int64_t> max_path,
         const std::string& objective, const std::vector<std::string>& also) {
        mixlab::DesignOptions o;
        o.T = T;
        // None is "no limit"; a number must be positive (design_search says so, naming the argument).
        o.max_time = max_time ? *max_time : -1;
        o.max_cache = max_cache ? *max_cache : -1;
        o.max_path = max_path ? *max_path : -1;
        MIXLAB_CHECK(!max_time || *max_time >= 1, "design: max_time must be a positive integer, got {}", *max_time);
        MIXLAB_CHECK(!max_cache || *max_cache >= 1, "design: max_cache must be a positive integer, got {}", *max_cache);
        MIXLAB_CHECK(!max_path || *max_path >= 1, "design: max_path must be a positive integer, got {}", *max_path);
        o.objective = mixlab::design_objective_parse(objective);
        o.extra_specs = also;
        std::string text;
        {
          py::gil_scoped_release release;
          text = mixlab::design_json(mixlab::design_search(o))["table"].dump();
        }
        return py::module_::import("json").attr("loads")(text);
      },
      py::arg("T"), py::arg("max_time") = py::none(), py::arg("max_cache") = py::none(),
      py::arg("max_path") = py::none(), py::arg("objective") = "path", py::arg("also") = std::vector<std::string>{},
      R"doc(
Searches the pattern families for a budget at length T, like `mixlab design --json`, and returns
its ranked table: a list of dicts (spec, time_max, time_mean, cache_max, cache_mean, path_max,
path_mean, path_exact, congestion_lower/upper/exact, on_front, train, ...), best first for the
objective ('path', 'congestion' or 'cost'). Limits left None are not applied. Raises mixlab.Error
for bad arguments and when nothing fits (the message names the limit and the closest candidate).
)doc");
}

void bind_resolvent(py::module_& m) {
  m.def(
      "resolvent",
      [](const at::Tensor& alpha, const at::Tensor& beta, const at::Tensor& x, const py::handle& pattern,
         const OptTensor& gate) {
        const Pattern p = pattern_arg(pattern, "resolvent");
        py::gil_scoped_release release;
        return mixlab::resolvent_forward(alpha, beta, x, p, value_or_undefined(gate));
      },
      py::arg("alpha"), py::arg("beta"), py::arg("x"), py::arg("pattern"), py::arg("gate") = py::none(), R"doc(
Y = (I - B)^-1 A X over a sparsity pattern, differentiable in alpha, beta, x and gate.

Row form (0-based rows, P(i) the pattern's past positions, nearest first):
    y_i = alpha_i0 x_i + sum_s alpha_i,s+1 x_P(i)[s] + sum_s beta_is y_P(i)[s]
Gated (gate g in [0,1]): y_i = (1 - g_i) * (A row) + g_i * (B row), elementwise over D.

Shapes (W = Pattern.max_width(T)):
    alpha (B,H,T,W+1)  slot 0 the diagonal, slot s+1 past slot s; (B,H,T,1) = diagonal A
    beta  (B,H,T,W)    recurrent patterns; (B,H,T,0) for causal / band:W (B = 0)
    x     (B,H,T,D)    gate (B,H,T,D) or None
Returns y (B,H,T,D). float32 or float64, CPU. Cost O(nnz * D), never a T x T tensor.
pattern: a mixlab.Pattern or a spec string. Bad shapes raise mixlab.Error naming the argument.
)doc");

  // The same call timed in a C++ loop: the baseline of the Python-overhead benchmark
  // (bench/python_overhead.py). Returns seconds per call.
  m.def(
      "_time_resolvent_cpp",
      [](const at::Tensor& alpha, const at::Tensor& beta, const at::Tensor& x, const py::handle& pattern,
         const OptTensor& gate, int64_t iters) {
        MIXLAB_CHECK(iters >= 1, "_time_resolvent_cpp: iters must be >= 1, got {}", iters);
        const Pattern p = pattern_arg(pattern, "_time_resolvent_cpp");
        const at::Tensor g = value_or_undefined(gate);
        py::gil_scoped_release release;
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < iters; ++i) mixlab::resolvent_forward(alpha, beta, x, p, g);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        return took.count() / static_cast<double>(iters);
      },
      py::arg("alpha"), py::arg("beta"), py::arg("x"), py::arg("pattern"), py::arg("gate") = py::none(),
      py::arg("iters") = 10);
}

void bind_kernels(py::module_& m) {
  m.def(
      "diag_decay_chunked",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
         const OptTensor& initial_state, int64_t chunk) {
        mixlab::AffineResult r;
        {
          py::gil_scoped_release release;
          r = mixlab::diag_decay_chunked(q, k, v, g, value_or_undefined(initial_state), chunk);
        }
        return affine_tuple(std::move(r));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("initial_state") = py::none(),
      py::arg("chunk") = 64, R"doc(
Affine recurrence with diagonal decay (linear attention, RetNet, GLA, Mamba, mLSTM, gated RFA),
chunked training form:  S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,  o_t = S_t^T q_t.

q, k, g (B,H,T,Dk) (g: log decay, finite, <= 0), v (B,H,T,Dv), initial_state (B,H,Dk,Dv) or None;
chunk a power of two. Returns (out (B,H,T,Dv), final_state (B,H,Dk,Dv)), differentiable in all inputs.
Runs fused native kernels (see fused_affine_isa()): a token loop without gradients, a
checkpointed forward and a fused backward with them (no double backward); the results equal the
chunked composition to float rounding.
)doc");
  m.def(
      "use_cpu_block_cache",
      [](int64_t budget_mb) {
        MIXLAB_CHECK(budget_mb <= kMaxCacheMb, "use_cpu_block_cache: budget_mb must be <= {} (MiB), got {}",
                     kMaxCacheMb, budget_mb);
        return mixlab::install_cpu_block_cache(budget_mb < 0 ? -1 : budget_mb * (int64_t(1) << 20));
      },
      py::arg("budget_mb") = -1,
      "Makes mixlab's CPU block cache torch's CPU allocator for this process (mixlab/core/cpu_block_cache.h): "
      "freed tensors of >= 1 MiB keep their memory for the next tensor of the same size instead of "
      "page-faulting fresh pages (what the mixlab CLI does). It also sets glibc's mmap threshold (2 MiB) and "
      "trim threshold (64 MiB) so that smaller tensors keep their pages between steps, unless GLIBC_TUNABLES "
      "(glibc.malloc.*), MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ is set; those thresholds without the "
      "cache made a plain training loop slower, so they come only with it. budget_mb < 0 reads MIXLAB_CPU_CACHE_MB "
      "(default 2048); 0 installs nothing and sets nothing. Returns whether it is installed; idempotent.");
  m.def(
      "cpu_block_cache_stats",
      [] {
        const auto s = mixlab::cpu_block_cache_stats();
        py::dict d;
        d["installed"] = s.installed;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["cached_bytes"] = s.cached_bytes;
        d["budget_bytes"] = s.budget_bytes;
        d["malloc_tuned"] = s.malloc_tuned;
        return d;
      },
      "The block cache's counters: installed, hits, misses, cached_bytes, budget_bytes, and malloc_tuned "
      "(glibc's thresholds set at installation).");
  m.def(
      "blas_kernels", [] { return mixlab::blas_summary(); },
      "The BLAS library and kernels torch's matmuls run in this process (mixlab/core/blas_info.h), e.g. "
      "'OpenBLAS 0.3.21, Cooperlake kernels', with '(forced by OPENBLAS_CORETYPE)' when that variable chose "
      "them. Timings and the last bits of results depend on them.");
  m.def(
      "fused_affine_isa", [] { return std::string(mixlab::fused_affine_isa()); },
      "Instruction set of the fused affine forward on this CPU: 'avx512', 'avx2' or 'generic' (the "
      "environment variable MIXLAB_CPU_ISA may name a lower one).");
  m.def(
      "diag_decay_recurrent",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
         const OptTensor& initial_state) {
        mixlab::AffineResult r;
        {
          py::gil_scoped_release release;
          r = mixlab::diag_decay_recurrent(q, k, v, g, value_or_undefined(initial_state));
        }
        return affine_tuple(std::move(r));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("initial_state") = py::none(),
      "The token loop of the same recurrence (the decode kernel); equals diag_decay_chunked.");
  m.def(
      "delta_rule_chunked",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
         const OptTensor& log_alpha, const OptTensor& initial_state, int64_t chunk) {
        mixlab::AffineResult r;
        {
          py::gil_scoped_release release;
          r = mixlab::delta_rule_chunked(q, k, v, beta, value_or_undefined(log_alpha),
                                         value_or_undefined(initial_state), chunk);
        }
        return affine_tuple(std::move(r));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("beta"), py::arg("log_alpha") = py::none(),
      py::arg("initial_state") = py::none(), py::arg("chunk") = 64, R"doc(
Delta-rule recurrence (DeltaNet; gated DeltaNet with log_alpha), chunked WY/UT form:
S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,  o_t = S_t^T q_t.

q, k (B,H,T,Dk), v (B,H,T,Dv), beta (B,H,T) in [0,2], log_alpha (B,H,T) <= 0 or None,
initial_state (B,H,Dk,Dv) or None, chunk >= 1. Returns (out, final_state), differentiable.
)doc");
  m.def(
      "delta_rule_recurrent",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
         const OptTensor& log_alpha, const OptTensor& initial_state) {
        mixlab::AffineResult r;
        {
          py::gil_scoped_release release;
          r = mixlab::delta_rule_recurrent(q, k, v, beta, value_or_undefined(log_alpha),
                                           value_or_undefined(initial_state));
        }
        return affine_tuple(std::move(r));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("beta"), py::arg("log_alpha") = py::none(),
      py::arg("initial_state") = py::none(), "The token loop of the delta rule; equals delta_rule_chunked.");

  m.def(
      "toeplitz",
      [](const at::Tensor& t, const at::Tensor& x, const OptTensor& bias, const std::string& path) {
        const mixlab::ToeplitzPath p = toeplitz_path_arg(path);
        py::gil_scoped_release release;
        return mixlab::toeplitz_forward(t, x, value_or_undefined(bias), p);
      },
      py::arg("t"), py::arg("x"), py::arg("bias") = py::none(), py::arg("path") = "auto", R"doc(
Causal Toeplitz mixing: y[b,h,i] = sum_{j<=i} t[h,i-j] x[b,h,j] + bias[h,i].

t (H,Tmax) lag weights, x (B,H,T,D), bias (H,Tmax) or None, Tmax >= T. path: 'fft' (O(T log T)),
'materialized' (a T x T matmul, faster for short T) or 'auto'. Differentiable in t, x and bias.
)doc");
}

void bind_attention(py::module_& m) {
  m.def(
      "causal_attention",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t window) {
        py::gil_scoped_release release;
        return mixlab::causal_attention(q, k, v, window);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("window") = 0, R"doc(
Causal softmax attention on split heads: y[b,h,i] = softmax_j<=S+i(q_i . k_j / sqrt(D)) v.

q (B,H,T,D); k, v (B,H,S+T,D) (S >= 0 cached positions before the queries). window W > 0: local
attention, j runs over max(0, S+i-W)..S+i only (key blocks before the window are skipped). Native blocked kernel
(no T x T tensor, keys above the diagonal skipped) for float32/float64 with D a multiple of 4
(float) or 2 (double); LibTorch ops otherwise. Differentiable in q, k and v.
)doc");
}

void bind_selective_scan(py::module_& m) {
  m.def(
      "selective_scan",
      [](const at::Tensor& u, const at::Tensor& delta, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
         const at::Tensor& d, const OptTensor& h0) {
        // The final state is not differentiable: it is returned only when no gradient is recorded.
        bool graph = false;
        for (const auto* t : {&u, &delta, &a, &b, &c, &d}) graph = graph || t->requires_grad();
        graph = graph && at::GradMode::is_enabled();
        at::Tensor y, final_state;
        {
          py::gil_scoped_release release;
          y = mixlab::selective_scan(u, delta, a, b, c, d, value_or_undefined(h0), graph ? nullptr : &final_state);
        }
        return std::make_pair(y, graph ? py::object(py::none()) : py::cast(final_state));
      },
      py::arg("u"), py::arg("delta"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("d"),
      py::arg("h0") = py::none(), R"doc(
Mamba's selective scan (the ssm mixer's recurrence), fused: returns (y (B,T,C), h_final (B,C,N));
h_final is None when a gradient is recorded (it is not differentiable).

  h_t[c,n] = exp(delta_t[c] a[c,n]) h_{t-1}[c,n] + delta_t[c] b_t[n] u_t[c],  h_{-1} = h0 or 0
  y_t[c]   = sum_n c_t[n] h_t[c,n] + d[c] u_t[c]

u, delta (B,T,C); a (C,N); b, c (B,T,N); d (C); h0 (B,C,N) or None (a constant). Differentiable in
u, delta, a, b, c and d; no (B,T,C,N) tensor is built.
)doc");
}

void bind_mixers(py::module_& m) {
  py::class_<mixlab::MixerState, std::shared_ptr<mixlab::MixerState>>(m, "MixerState", R"doc(
Decode state of one mixer for a batch of sequences (from Mixer.init_state). Opaque; pass it to
Mixer.step, which advances it by one token.
)doc")
      .def_property_readonly("position", &mixlab::MixerState::position, "Tokens consumed so far.")
      .def_property_readonly("bytes", &mixlab::MixerState::bytes, "Bytes held by the state's tensors (measured).")
      .def_property_readonly("cached_positions", &mixlab::MixerState::cached_positions,
                             "Past positions held (attention-like caches), 0 for a fixed-size state.");

  // The C++ module; python/mixlab/__init__.py wraps it in a torch.nn.Module.
  py::class_<mixlab::Mixer, std::shared_ptr<mixlab::Mixer>>(m, "_Mixer")
      .def(
          "forward",
          [](mixlab::Mixer& mx, const at::Tensor& x) {
            check_mixer_input(mx, "Mixer.forward", "x", x, 3);
            return mx.forward(x);
          },
          py::arg("x"), py::call_guard<py::gil_scoped_release>())
      .def(
          "init_state",
          [](mixlab::Mixer& mx, int64_t batch) {
            MIXLAB_CHECK(batch >= 1 && batch <= kMaxBatch, "Mixer.init_state: batch must be in [1, {}], got {}",
                         kMaxBatch, batch);
            return std::shared_ptr<mixlab::MixerState>(mx.init_state(batch));
          },
          py::arg("batch"), py::call_guard<py::gil_scoped_release>())
      .def(
          "step",
          [](mixlab::Mixer& mx, const std::shared_ptr<mixlab::MixerState>& state, const at::Tensor& x_t) {
            MIXLAB_CHECK(state != nullptr, "Mixer.step: state is None (use Mixer.init_state(batch))");
            check_mixer_input(mx, "Mixer.step", "x_t", x_t, 2);
            MIXLAB_CHECK(x_t.size(0) == state->batch(), "Mixer.step: x_t must have B = {} (the state's batch), got {}",
                         state->batch(), mixlab::shape_string(x_t));
            return mx.step(*state, x_t);
          },
          py::arg("state"), py::arg("x_t"), py::call_guard<py::gil_scoped_release>())
      .def(
          "prefill",
          [](mixlab::Mixer& mx, const std::shared_ptr<mixlab::MixerState>& state, const at::Tensor& x) {
            MIXLAB_CHECK(state != nullptr, "Mixer.prefill: state is None (use Mixer.init_state(batch))");
            check_mixer_input(mx, "Mixer.prefill", "x", x, 3);
            MIXLAB_CHECK(x.size(0) == state->batch(), "Mixer.prefill: x must have B = {} (the state's batch), got {}",
                         state->batch(), mixlab::shape_string(x));
            return mx.prefill(*state, x);
          },
          py::arg("state"), py::arg("x"), py::call_guard<py::gil_scoped_release>())
      // Decode states in the one state format (mixlab/mixer/state_io.h): header with the mixer's
      // spec, version and checksum. Bytes for in-memory use, files written atomically by C++.
      .def(
          "save_state",
          [](mixlab::Mixer& mx, const std::shared_ptr<mixlab::MixerState>& state) {
            MIXLAB_CHECK(state != nullptr, "Mixer.save_state: state is None");
            std::ostringstream out(std::ios::binary);
            {
              py::gil_scoped_release release;
              check_own_state(mx, *state, "Mixer.save_state");
              mx.save(*state, out);
            }
            return py::bytes(out.str());
          },
          py::arg("state"))
      .def(
          "load_state",
          [](mixlab::Mixer& mx, const py::bytes& data) {
            std::istringstream in(std::string(data), std::ios::binary);
            py::gil_scoped_release release;
            return std::shared_ptr<mixlab::MixerState>(mx.load(in, "bytes"));
          },
          py::arg("data"))
      .def(
          "save_state_file",
          [](mixlab::Mixer& mx, const std::shared_ptr<mixlab::MixerState>& state, const std::string& path) {
            MIXLAB_CHECK(state != nullptr, "Mixer.save_state: state is None");
            check_own_state(mx, *state, "Mixer.save_state");
            mx.save_file(*state, path);
          },
          py::arg("state"), py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def(
          "load_state_file",
          [](mixlab::Mixer& mx, const std::string& path) {
            return std::shared_ptr<mixlab::MixerState>(mx.load_file(path));
          },
          py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def(
          "fork",
          [](mixlab::Mixer& mx, const std::shared_ptr<mixlab::MixerState>& state) {
            MIXLAB_CHECK(state != nullptr, "Mixer.fork: state is None");
            return std::shared_ptr<mixlab::MixerState>(mx.fork(*state));
          },
          py::arg("state"), py::call_guard<py::gil_scoped_release>())
      .def("named_parameters",
           [](mixlab::Mixer& mx) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& item : mx.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
             return out;
           })
      .def("named_buffers",
           [](mixlab::Mixer& mx) {
             std::vector<std::pair<std::string, at::Tensor>> out;
             for (const auto& item : mx.named_buffers(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
             return out;
           })
      .def(
          "train", [](mixlab::Mixer& mx, bool mode) { mx.train(mode); }, py::arg("mode"))
      .def_property_readonly("spec", &mixlab::Mixer::spec)
      .def_property_readonly("cost_class", &mixlab::Mixer::cost_class)
      .def_property_readonly("pattern_spec", &mixlab::Mixer::pattern_spec);

  m.def(
      "_mixer_create",
      [](const std::string& spec, int64_t d_model, int64_t n_heads, int64_t max_len) {
        check_mixer_dims("mixer", d_model, n_heads, max_len);
        return mixlab::mixer_create(spec, mixlab::MixerDims{d_model, n_heads, max_len});
      },
      py::arg("spec"), py::arg("d_model"), py::arg("n_heads"), py::arg("max_len"));
  m.def(
      "mixer_families",
      [] {
        py::list out;
        for (const auto& f : mixlab::mixer_families())
          out.append(py::dict(py::arg("family") = f.family, py::arg("usage") = f.usage,
                              py::arg("description") = f.description));
        return out;
      },
      "Every registered mixer family (what `mixlab mixers` prints): dicts with family, usage, description.");
  m.def(
      "check_mixer_spec",
      [](const std::string& spec, int64_t d_model, int64_t n_heads, int64_t max_len) {
        check_mixer_dims("check_mixer_spec", d_model, n_heads, max_len);
        mixlab::check_mixer_spec(spec, mixlab::MixerDims{d_model, n_heads, max_len});
      },
      py::arg("spec"), py::arg("d_model") = 16, py::arg("n_heads") = 2, py::arg("max_len") = 64,
      "Validates a mixer spec (family and every argument) without building it; raises mixlab.Error.");
  m.def(
      "mixer_layer_specs",
      [](const std::string& spec, int64_t layers) {
        // The C++ grammar takes a spec without '|' or '*' as is (check_mixer_spec judges it), so
        // "" came back as one empty spec per layer; and it returns one string per layer.
        MIXLAB_CHECK(!spec.empty(), "mixer_layer_specs: spec is empty; expected a mixer spec or a per-layer list");
        MIXLAB_CHECK(layers <= kMaxLayers, "mixer_layer_specs: layers must be <= {}, got {}", kMaxLayers, layers);
        return mixlab::mixer_layer_specs(spec, layers);
      },
      py::arg("spec"), py::arg("layers"),
      "The mixer spec of each of `layers` layers of a model's mixer spec: one spec for all, or a per-layer list "
      "(a hybrid stack, 'ssm*3|attention': '|' between layers, '*N' repeats, a shorter list repeats when it "
      "divides layers). Checks the list's grammar; raises mixlab.Error.");
}

}  // namespace

PYBIND11_MODULE(_mixlab, m) {
  m.doc() = "mixlab's C++ kernels and mixers (compiled part); import mixlab instead.";
  m.attr("__version__") = MIXLAB_VERSION;
  bind_errors(m);
  bind_pattern(m);
  bind_resolvent(m);
  bind_kernels(m);
  bind_selective_scan(m);
  bind_attention(m);
  bind_mixers(m);
  mixlab::python::bind_model(m);
}
