// mixlab/resolvent/resolvent.h — the sparse resolvent op Y = (I − B)⁻¹ A X over a pattern.
//
// Row form (SPEC-NOTES §1, seed 000 eq. 1), 0-based rows, P(i) the pattern's past positions:
//   y_i = alpha_ii x_i + sum_{j in P(i)} alpha_ij x_j + sum_{j in P(i)} beta_ij y_j
// Gated form (seed 000 B.2, gate g per row and channel, A = (1 − diag g)Ã, B = diag(g) B̃):
//   y_i = (1 − g_i) ⊙ (sum_j alpha_ij x_j) + g_i ⊙ (sum_j beta_ij y_j)      (elementwise over d)
// which is, channel by channel, y^d = (I − diag(g^d) B)⁻¹ diag(1 − g^d) A x^d: exact, no
// approximation (the dense reference builds exactly that per channel).
//
// Shapes (letters: mixlab/core/tensor_checks.h; W = pattern_index(p, t0 + T).W):
//   x     (B,H,T,D)    inputs (values)
//   alpha (B,H,T,W_A)  W_A = W+1: slot 0 = the diagonal (row i itself), slot s+1 = past slot s
//                      of the PatternIndex (nearest first). W_A = 1 is accepted: A diagonal
//                      (used by the weight sharing A = BD + D' of seed 000 B.3).
//   beta  (B,H,T,W_B)  W_B = W for recurrent patterns (beta slot s = past slot s), W_B = 0 for
//                      non-recurrent ones (causal, band:W), where B = 0.
//   gate  (B,H,T,D)    optional, values in [0, 1] (seed 000 B.2: g in [0, 1]^d, a probability per
//                      row and channel; the ends 0 and 1 included). Checked, one pass over the
//                      gate: a value outside, NaN or inf is a mixlab::Error naming it and its index.
//                      (ResolventMixer's own sigmoid gates skip the pass: src/resolvent/resolvent_gate.h.)
//   y     (B,H,T,D)
// Slots past a row's true width |P(i)| are ignored (their gradient is 0).
//
// Cost: forward O(nnz·D) with nnz = sum_i (|P(i)| + 1); backward the same (transposed solve,
// a scatter over each row's pattern while going from the last row to the first). No T×T tensor
// anywhere; memory O(B·H·T·(D + W)). Parallel over B·H with at::parallel_for; inner loops are
// contiguous over D. float32 accumulates in float32, float64 in float64.
// Three kernels. Patterns whose rows read every offset 1..W of a window of W >= 64 (dense,
// causal, linear, band:W), gated or not, from position 0, take BLAS-3 block solves (seed 000 B.4:
// 128-row blocks, one GEMM panel per block, the in-block triangle row by row; O(T·(W + 128))
// panel work and memory per slice, still no T×T tensor; see ResolventDenseBlocks below). Other
// translation-invariant patterns (all but +cache) from position 0 take a blocked forward
// substitution (blocks of 64 rows; for each offset, the block's reads of earlier rows are one
// contiguous range) and build no (T,W) index. +cache patterns, chunks that continue a state
// and decode take the row-by-row kernel over the PatternIndex. Where D is a multiple of one
// 16-byte vector (4 floats, 2 doubles), the forward of all but the block solve runs one
// register-accumulator kernel instead, row by row, in the widest vector of the instruction set
// whose lanes divide D (see
// ResolventPlainLoopsGuard), and so does the backward: two passes, the first gathering into each
// row the gradient of the later rows that read it (the transposed solve), the second taking each
// row's own dots upwards, as the forward reads.
// Figures: docs/log/benchmarks-2026-11.md (resolvent section).
//
// Chunked prefill: pass a ResolventState as `past`: the chunk's rows are the absolute positions
// t0 .. t0+T−1 (t0 = past->position()), rows read positions < t0 from the state. The state is
// not modified (call ResolventState::append afterwards) and receives no gradient.
//
// Decode: resolvent_step(state, alpha_t, beta_t, x_t[, gate_t]) computes one row from the state.
//
// What this is not: a GPU kernel (CPU only), and no gradient flows into a `past` state.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mixlab/core/reference_guard.h"
#include "mixlab/mixer/mixer.h"
#include "mixlab/pattern/pattern.h"

namespace mixlab {

class ResolventState;

/// Y = (I − B)⁻¹ A X over `pattern` (see the file header), differentiable in alpha, beta, gate
/// and x. `gate` may be undefined (ungated form). Throws mixlab::Error naming the argument, the
/// expected shape in letters and the actual sizes for bad inputs (mismatched B/H/T/D, W not
/// matching the pattern, wrong dtype or device, T = 0), and naming the value and its index for a
/// gate value outside [0, 1] (NaN, inf included).
torch::Tensor resolvent_forward(const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& x,
                                const Pattern& pattern, const torch::Tensor& gate = {},
                                const ResolventState* past = nullptr);

/// While one is alive on this thread, resolvent_forward, prefill, resolvent_step and the op's
/// backward run the plain loops (the row and blocked kernels, D-loops over accumulators in memory)
/// instead of the register kernels that take every D that is a multiple of 4 (float) or 2
/// (double) otherwise. The forwards compute the same sums in the same order; the register
/// backward gathers where the plain one scatters, so its sums agree to rounding. The guard exists
/// so that tests compare them and benchmarks time both in one run (the `plain` rows of
/// bench_resolvent).
using ResolventPlainLoopsGuard = ReferenceGuard<struct ResolventRegisterKernelOp>;

/// The plain reference: builds dense A and B (B,H,T,T) from the coefficients (per channel when
/// gated: (B,H,D,T,T)) and calls torch::linalg_solve_triangular, as seed 000 did. O(T²) memory,
/// O(T³) time; for tests and benchmarks only. Differentiable through torch autograd.
torch::Tensor resolvent_reference(const torch::Tensor& alpha, const torch::Tensor& beta, const torch::Tensor& x,
                                  const Pattern& pattern, const torch::Tensor& gate = {});

/// The block-diagonal dense solve (seed 000 B.4): patterns whose rows read the contiguous
/// offsets 1..W with W >= min_width (dense, causal, wide band:W, offsets:1,2,...,n), gated or
/// not, from position 0, run in blocks of `rows` rows with BLAS-3 panels instead of row by row. The
/// result is the same function (tests compare both kernels). Process-wide; set it before calls,
/// not while one runs: it exists so that tests can reach the block path at small T and
/// benchmarks can time both kernels in one run.
struct ResolventDenseBlocks {
  int64_t min_width = 64;  // a huge value turns the block solve off
  int64_t rows = 128;
};
ResolventDenseBlocks resolvent_dense_blocks();
/// Throws mixlab::Error for min_width < 1 or rows < 1.
void set_resolvent_dense_blocks(const ResolventDenseBlocks& tuning);
/// Sets the tuning for one scope and restores the previous one (tests, benchmarks).
class ResolventDenseBlocksScope {
 public:
  explicit ResolventDenseBlocksScope(const ResolventDenseBlocks& tuning) { set_resolvent_dense_blocks(tuning); }
  ~ResolventDenseBlocksScope() { set_resolvent_dense_blocks(saved_); }
  ResolventDenseBlocksScope(const ResolventDenseBlocksScope&) = delete;
  ResolventDenseBlocksScope& operator=(const ResolventDenseBlocksScope&) = delete;

 private:
  ResolventDenseBlocks saved_ = resolvent_dense_blocks();
};
/// Whether resolvent_forward over `pattern` at length T from position 0 takes the block solve
/// under the current tuning (gated or not).
bool resolvent_uses_dense_blocks(const Pattern& pattern, int64_t T);

/// What a decode state stores per held position.
struct ResolventStateLayout {
  bool store_x = true;              // past inputs (false when A is diagonal: W_A = 1)
  bool store_y = true;              // past outputs (false for non-recurrent patterns: B = 0)
  std::vector<int64_t> extra_dims;  // extra per-position channels (B,H,·,extra_dims[k]), e.g. keys
};

/// Decode state of the resolvent op for B sequences × H heads: the (x_j, y_j[, extras]) of the
/// positions that future rows can still read, and nothing else:
///   +cache patterns:            P(t) of the next row t (⊆ S ∪ {last}, seed 000 Prop. 4.11),
///   band:W, order:K, offsets:…: the last max-offset positions,
///   causal, dense, pow2, square, linear: all positions.
/// Storage is slot-based (B,H,Cap,·) tensors that grow by doubling; freed slots are reused.
/// bytes() reports the allocated bytes of those tensors (capacity, measured), cached_positions()
/// the number of positions held.
class ResolventState : public MixerState {
 public:
  ResolventState(const Pattern& pattern, int64_t batch, int64_t heads, int64_t head_dim, torch::ScalarType dtype,
                 ResolventStateLayout layout = {});

  int64_t position() const override { return position_; }
  int64_t bytes() const override;
  int64_t cached_positions() const override { return static_cast<int64_t>(slot_of_.size()); }

  const Pattern& pattern() const { return pattern_; }
  int64_t batch() const override { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }
  torch::ScalarType dtype() const { return dtype_; }
  const ResolventStateLayout& layout() const { return layout_; }

  /// Positions held, ascending.
  std::vector<int64_t> held_positions() const;
  /// P(position()): the past positions the next row reads, nearest first (= pattern().row of it).
  /// Cache-efficient patterns keep it from the eviction that computed it, so a decode step does
  /// not rebuild the closed form a second time.
  std::vector<int64_t> next_row() const;
  /// Slot of a held position, or -1.
  int64_t slot_of(int64_t position) const;
  /// Slot tensors (B,H,Cap,D) / (B,H,Cap,extra_dims[k]); rows of free slots are garbage.
  const torch::Tensor& x_slots() const { return x_; }
  const torch::Tensor& y_slots() const { return y_; }
  const torch::Tensor& extra_slots(size_t k) const { return extras_.at(k); }
  /// Gathers the rows of `positions` (all held) from a slot tensor: (B,H,len(positions),·).
  torch::Tensor gather(const torch::Tensor& slots, const std::vector<int64_t>& positions) const;

  /// Appends the next T positions: x, y (B,H,T,D) (undefined when not stored), extras
  /// (B,H,T,extra_dims[k]); evicts what no future row can read. Values are detached copies.
  /// T is read from x, y or extras[0], whichever is given first, even when the layout does not
  /// store it.
  void append(const torch::Tensor& x, const torch::Tensor& y, const std::vector<torch::Tensor>& extras = {});
  /// Advances T positions of a state that stores nothing (W_A = 1, non-recurrent, no extras):
  /// its rows read no past value, only the position moves (chunked prefill of such a pattern).
  void advance(int64_t T);
  /// Decode on raw rows (ResolventMixer's step): advances one position as append would for one
  /// row (the slot is taken first, then what no future row reads is evicted) and returns the slot
  /// of the new position. The caller writes that position's rows of x_slots(), y_slots() and
  /// extra_slots(k) (per (b,h): element ((b·H + h)·Cap + slot)·E) before any other call on the
  /// state; slot tensors may have been reallocated, so their pointers are read after this call.
  int64_t append_slot();

  /// Grows the slot tensors to hold at least `slots` positions now (decode of a known length
  /// then never pays a doubling copy mid-stream). Never shrinks.
  void reserve(int64_t slots);

  /// Position, held positions and their rows (x, y, extras), in the state format
  /// (mixlab/mixer/state_io.h); the layout is the mixer's (implied by its spec). Reading needs a
  /// fresh state (position 0) of the same layout.
  void io(StateArchive& ar) override;
  /// A standalone round trip (no mixer): the state format headed "resolvent-op", with the
  /// pattern, sizes, dtype and layout as entries before io's. load throws mixlab::Error for a
  /// malformed, corrupt or truncated stream.
  void save(std::ostream& out) const;
  static std::unique_ptr<ResolventState> load(std::istream& in);

 private:
  enum class Horizon { kAll, kLast, kPattern };
  int64_t take_slot();
  std::vector<int64_t> take_slots(int64_t T);  // T next positions: slots, eviction
  void evict_after(int64_t next_row);

  Pattern pattern_;
  int64_t batch_, heads_, head_dim_;
  torch::ScalarType dtype_;
  ResolventStateLayout layout_;
  Horizon horizon_ = Horizon::kAll;
  int64_t last_ = 0;  // for kLast: positions >= next_row - last_ are kept
  int64_t position_ = 0;
  int64_t capacity_ = 0;
  torch::Tensor x_, y_;                // (B,H,Cap,D)
  std::vector<torch::Tensor> extras_;  // (B,H,Cap,E_k)
  std::unordered_map<int64_t, int64_t> slot_of_;
  std::vector<int64_t> free_slots_;
  std::vector<int64_t> next_row_;  // kPattern: P(next_row_at_), from evict_after
  int64_t next_row_at_ = -1;
};

/// One decode row t = state.position(): alpha_t (B,H,1+|P(t)|) (or (B,H,1) for diagonal A),
/// beta_t (B,H,|P(t)|) (recurrent) or (B,H,0), x_t (B,H,D), gate_t (B,H,D) or undefined,
/// extras_t (B,H,extra_dims[k]) the extra channels of row t (e.g. its keys). gate_t in [0, 1]
/// as resolvent_forward's gate (checked the same way, before the state moves).
/// Returns y_t (B,H,D) and appends (x_t, y_t, extras_t) to the state. O(|P(t)|·D) per (b,h).
/// No autograd.
torch::Tensor resolvent_step(ResolventState& state, const torch::Tensor& alpha_t, const torch::Tensor& beta_t,
                             const torch::Tensor& x_t, const torch::Tensor& gate_t = {},
                             const std::vector<torch::Tensor>& extras_t = {});

/// The read table of a chunk: for chunk row r (absolute t0 + r) and past slot s, where the kernel
/// finds position P(t0+r)[s]: >= 0 a chunk row, <= −2 index −(v+2) into `past_positions`,
/// −1 unused. For a translation-invariant pattern from position 0 no table is built: `offsets`
/// is set and slot s of row r is r − offsets[s] (the periodic structure: every row reads the same
/// offsets). Exposed for the score op (mixlab/resolvent/pattern_scores.h).
struct ResolventRows {
  // Move-only: src/count/offsets may point into the holders below (a move keeps their buffers).
  ResolventRows() = default;
  ResolventRows(ResolventRows&&) = default;
  ResolventRows& operator=(ResolventRows&&) = default;
  ResolventRows(const ResolventRows&) = delete;
  ResolventRows& operator=(const ResolventRows&) = delete;

  int64_t t0 = 0, T = 0, W = 0;
  std::shared_ptr<const PatternIndex> index;  // of length t0 + T (null on the offsets path)
  const int64_t* src = nullptr;               // (T,W), or null on the offsets path
  const int64_t* count = nullptr;             // (T)
  const int64_t* offsets = nullptr;           // (W) ascending, offsets path only
  std::vector<int64_t> past_positions;        // absolute positions read from the state
  torch::Tensor src_holder;                   // owns src when t0 > 0
  std::vector<int64_t> offsets_holder, count_holder;
};
ResolventRows resolvent_rows(const Pattern& pattern, int64_t T, const ResolventState* past);
/// The same table rebuilt in backward (src_holder from forward when t0 > 0).
ResolventRows resolvent_rows_restore(const Pattern& pattern, int64_t t0, int64_t T, const torch::Tensor& src);
/// W for rows < T: O(log T) for plain patterns (no index), the cached index for +cache ones.
int64_t resolvent_width(const Pattern& pattern, int64_t T);
/// |P(i)| for rows t0..t0+T−1.
std::vector<int64_t> resolvent_row_counts(const Pattern& pattern, int64_t t0, int64_t T);

}  // namespace mixlab
