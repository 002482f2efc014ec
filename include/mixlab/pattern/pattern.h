// mixlab/pattern/pattern.h — sparsity patterns of Y = (I − B)⁻¹ A X.
//
// A pattern says, for each row i of a length-T sequence, which past positions P(i) row i may
// read. Convention (SPEC-NOTES §1): the pattern of B for row i is P(i); the pattern of A is
// P(i) ∪ {i}. A *non-recurrent* pattern (kinds `causal`, `band:W`) has B = 0: its A pattern is
// still P(i) ∪ {i} but no past outputs are read (attention / local attention).
//
// Positions are 0-based in code (row 0 is the first token). Printed tables say which convention
// they use; the seed documents are 1-based.
//
// Spec strings (used by the CLI, configs and checkpoints):
//   causal            full causal attention (A dense lower triangular, B = 0)
//   band:W            local attention: the W previous positions (B = 0)
//   dense             dense recurrence: P(i) = {0..i-1}
//   order:K           k-th order recurrence: P(i) = {i-1..i-K}; order:1 = diagonal SSM
//   pow2              translation-invariant, f(k) = 2^k
//   square            translation-invariant, f(k) = k^2 + 1
//   linear            translation-invariant, f(k) = k + 1 (same set as dense)
//   offsets:1,2,3,5   translation-invariant with the given strictly increasing offsets (first = 1)
//   geom:B            translation-invariant, offsets the distinct values of ceil(B^k), k >= 0, real
//                     B > 1 (geom:2 has the rows of pow2; B < 2 repeats values, kept once)
//   power:P           translation-invariant, f(k) = ceil(k^P) + 1, real P >= 1 (power:2 has the rows of
//                     square, power:1 those of linear)
//   fib               translation-invariant, the distinct Fibonacci numbers 1, 2, 3, 5, 8, 13, ...
//   ruler:L           translation-invariant, the non-zero marks of the sparsest Wichmann ruler of length
//                     >= L (every difference 1..L is a difference of two marks); a finite list
//   <a>+<b>[+...]     union of the offsets of translation-invariant kinds (pow2, square, linear, dense,
//                     offsets, geom, power, fib, ruler, order:K and band:W, the last two as offsets
//                     1..K): e.g. band:8+pow2, "local + logarithmic". Always recurrent (B = P(i)),
//                     band:W included. '+' because '|', '*' and ',' separate layers and list items
//                     in mixer specs and CLI lists.
//   <ti>+cache        cache-efficient variant of a translation-invariant kind or union (SPEC-NOTES §2)
//
// Every kind but causal and band is recurrent; every kind except causal, dense, order and band is
// a "translation-invariant family" (defined by offsets f(0) = 1 < f(1) < ..., +cache allowed).
//
// What this is not: a kernel. Kernels consume the PatternIndex below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mixlab {

enum class PatternKind {
  kCausal,
  kBand,
  kDense,
  kOrder,
  kPow2,
  kSquare,
  kLinear,
  kOffsets,
  kGeom,
  kPower,
  kFib,
  kRuler,
  kUnion
};

/// Longest sequence any pattern accepts (analysis and kernels). Guards against specs that would
/// ask for absurd memory; raise it here if a use needs more.
constexpr int64_t kPatternMaxT = int64_t{1} << 24;

class Pattern {
 public:
  /// Parses a spec string (see the file header). Throws mixlab::Error naming the spec and the
  /// problem for unknown kinds, W/K <= 0, malformed or non-increasing offsets, +cache on a kind
  /// that is not translation-invariant.
  static Pattern parse(const std::string& spec);

  /// The canonical spec string (round-trips through parse).
  const std::string& spec() const { return spec_; }
  PatternKind kind() const { return kind_; }
  /// W for band:W, K for order:K, L for ruler:L, 0 otherwise.
  int64_t width_param() const { return width_; }
  /// B for geom:B, P for power:P, 0 otherwise.
  double real_param() const { return real_; }
  /// The operands of a union (each a plain translation-invariant pattern); empty otherwise.
  const std::vector<Pattern>& union_parts() const { return parts_; }
  /// The largest offset when the plain pattern reads a bounded window (band:W, order:K, offsets,
  /// ruler, a union of such); -1 when offsets grow without bound (pow2, square, geom, ...).
  int64_t last_offset() const;
  /// True for pow2, square, linear, offsets, geom, power, fib, ruler and unions (with or without
  /// +cache).
  bool translation_invariant_family() const;
  /// True when the plain (non-cache) pattern is translation-invariant: the TI kinds, dense,
  /// order:K and band:W (offsets 1..W) — but not +cache variants.
  bool translation_invariant() const;
  bool cache_efficient() const { return cache_; }
  /// False for causal and band (B = 0): outputs never read past outputs.
  bool recurrent() const { return kind_ != PatternKind::kCausal && kind_ != PatternKind::kBand; }

  /// The offsets f(0) < f(1) < ... that are <= max_offset, for every translation-invariant
  /// plain pattern (dense/linear/causal: 1..max_offset, order:K/band:W: 1..K).
  std::vector<int64_t> offsets_upto(int64_t max_offset) const;

  /// Past positions P(i) of row i (0-based), nearest first (descending), no duplicates.
  /// Cost O(|P(i)|) for plain patterns and O(|P(i)| + K) for +cache (closed form).
  std::vector<int64_t> row(int64_t i) const;
  /// |P(i)| without building the row (O(log) for translation-invariant kinds).
  int64_t row_size(int64_t i) const;
  /// max_{i < T} |P(i)|: the slot width W a kernel needs for length T.
  int64_t max_width(int64_t T) const;

  /// Human-readable structure and asymptotic classes (seed 000 Table 1 wording).
  std::string structure_name() const;
  std::string time_class() const;   // e.g. "O(log2 n)"
  std::string cache_class() const;  // e.g. "O(n)"

 private:
  PatternKind kind_ = PatternKind::kDense;
  int64_t width_ = 0;
  double real_ = 0;                    // kGeom: B, kPower: P
  std::vector<int64_t> user_offsets_;  // kOffsets; kFib and kRuler: the generated list
  std::vector<Pattern> parts_;         // kUnion: the operands, plain
  bool cache_ = false;
  std::string spec_;
};

/// f(k) for the translation-invariant families: f(0) = 1 < f(1) < ...; returns -1 past the end
/// of a finite list (offsets, ruler, order/band, a union of finite lists) and for offsets beyond
/// kPatternMaxT of the generated kinds. O(1) for pow2/square/linear/power, O(k) for geom, O(k log k)
/// for a union.
int64_t pattern_offset(const Pattern& p, int64_t k);

/// The lattice steps a_k of Prop. 4.12 for the cache-efficient variant, for all k with
/// f(k) < max_offset: a_0 = 1, a_{k+1} = a_k * ceil((f(k+1) - f(k)) / a_k).
std::vector<int64_t> cache_lattice_steps(const Pattern& p, int64_t max_offset);

/// Cache-efficient sets S_i (1-based i as in the seed, i = 1..T) by the *corrected* recursion
/// of SPEC-NOTES §2: π rounds up within S_{i-1} ∪ {i-1}. Returned 1-based, ascending. O(T·K).
/// S_i is the set of past positions row i reads (Pattern::row(i-1) + 1), so S_1 = {}: the
/// seed's printed S_1 = {1} is the cache after step 1 (S_1 ∪ {1}), which yields the same S_2.
std::vector<std::vector<int64_t>> cache_sets_recursive(const Pattern& p, int64_t T);
/// The same sets from the closed form of Prop. 4.12 (1-based, ascending), i >= 1; equal to
/// cache_sets_recursive(p, T)[i-1] for every i <= T, i = 1 included ({}).
std::vector<int64_t> cache_set_closed_form(const Pattern& p, int64_t i);

/// Per-row index tensor data a kernel uses for length T, computed once per (spec, T) and cached.
/// Row i's past positions fill slots 0..count[i]-1 (nearest first); unused slots hold -1.
struct PatternIndex {
  int64_t T = 0;
  int64_t W = 0;               // max |P(i)| over i < T (0 for a T-length-1 sequence)
  std::vector<int64_t> past;   // (T, W) row-major, -1 = unused slot
  std::vector<int64_t> count;  // (T) true |P(i)|
  int64_t nnz() const;         // sum of count
  const int64_t* row(int64_t i) const { return past.data() + i * W; }
};

/// Builds (or returns the cached) index of `p` for length T. Thread-safe. Throws mixlab::Error
/// for T <= 0 or T > kPatternMaxT, or when T·W would exceed the memory guard.
std::shared_ptr<const PatternIndex> pattern_index(const Pattern& p, int64_t T);

}  // namespace mixlab
