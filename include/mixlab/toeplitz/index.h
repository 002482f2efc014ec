// mixlab/toeplitz/index.h — winding number of a Toeplitz symbol and the Fredholm index (seed 003 §7.2).
//
// For a lag vector t (N) (t[k] weights the token k steps back, as in mixlab/toeplitz/toeplitz.h)
// the symbol is s(θ) = sum_k t[k] e^{ikθ}, θ in [0, 2π). Its winding number w around 0
// (counter-clockwise positive) equals the number of zeros of p(z) = sum_k t[k] z^k inside the unit
// disk (argument principle), so 0 <= w <= N-1 for a causal lag vector.
//
// Sign convention (seed 003 §7.2, SPEC-NOTES §3): index = -w. The seed right-multiplies by the
// transposed (upper-triangular) matrix, whose symbol in its own indexing is s(-θ); its statement
// "index = winding number" is the same number. Check: the one-step shift t = [0, 1]
// (y_i = x_{i-1}) has w = 1 and index -1, the seed's "index of the shift operator".
//
// Method: s and s' are sampled at M = pow2 >= max(min_samples, 8N) equispaced points with one FFT
// each (double precision; M doubles while more than 1/64 of the arcs fail the test below); w is the sum of the
// principal phase increments over the arcs / 2π. The count is certified arc by arc: with h the arc length and L2 =
// sum_k k^2 |t[k]| (a bound on |s''|), |s(a)| > h |s'(a)| + h² L2 / 2 at the arc's start a keeps s on the arc inside a
// disk around s(a) that excludes 0, so no turn is missed. Arcs that fail are bisected (new points by Horner's rule,
// O(N) each) until they pass, with at most max_samples points in all.
// `degenerate` is set (and winding/index are 0) when min |s| <= zero_tol * sum_k |t[k]| (the symbol
// passes through 0 numerically: the operator is not Fredholm-stable) or when max_samples points
// could not certify the count. Cost O(M log M + N * refinement points) per lag vector.
//
// Not supported: complex lags; anti-causal (two-sided) symbols.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

struct ToeplitzIndexOptions {
  int64_t min_samples = 1024;
  int64_t max_samples = int64_t{1} << 22;
  double zero_tol = 1e-10;  // relative to sum_k |t[k]|
};

struct ToeplitzIndex {
  int64_t winding = 0;      // winding number w of s around 0
  int64_t index = 0;        // Fredholm index, seed 003 §7.2 convention: -w
  bool degenerate = false;  // true: |s| (numerically) reaches 0 or the count could not be certified
  double min_abs = 0.0;     // min over the samples of |s(θ)|
  int64_t samples = 0;      // points evaluated (grid + refinement)
  std::string reason;       // why degenerate ("" otherwise)
};

/// Winding number and index of the symbol of `lags` (N) (float32/float64, CPU, N >= 1; trailing
/// zeros are allowed). Throws mixlab::Error naming toeplitz_index for bad shapes/dtypes.
ToeplitzIndex toeplitz_index(const torch::Tensor& lags, const ToeplitzIndexOptions& options = {});

/// Number of zeros of p(z) = sum_k t[k] z^k with |z| < 1, from the eigenvalues of the companion
/// matrix (torch::linalg_eigvals), trailing zero coefficients dropped. Also returns the smallest
/// | |z| - 1 | over the roots in `margin` (for tests choosing well-separated examples).
/// Throws when all coefficients are zero.
int64_t toeplitz_zeros_inside(const torch::Tensor& lags, double* margin = nullptr);

/// One row per (module, head, kernel element) of every ToeplitzMixer in a model.
struct ToeplitzIndexEntry {
  std::string module;  // module path from named_modules(), "" for the root
  int64_t head = 0;
  int64_t kernel = 0;
  ToeplitzIndex result;
};

/// Indices of all heads/kernel elements of every ToeplitzMixer in `model` (the root included),
/// in named_modules() order. Uses the full lag vector (Tmax) of each head. Empty when there is none.
std::vector<ToeplitzIndexEntry> toeplitz_model_index(const torch::nn::Module& model,
                                                     const ToeplitzIndexOptions& options = {});

}  // namespace mixlab
