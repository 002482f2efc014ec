// mixlab/train/task_s5.h — the S5 state-tracking task (seed 004 §4.1, Fig. 3).
//
// A row is n permutations g_1..g_n of 5 elements drawn uniformly (with replacement); the target
// at every position t is the running composition p_t = g_1 · g_2 · ... · g_t, where
// (a · b)(i) = b(a(i)): apply a first, then b (sequence order). Every position is scored.
//
// Tokens (V = spec.vocab >= kS5MinVocab): the specials of tasks.h (0..3, unused here except kPad
// never appearing), then the 120 permutations: token kFirstContentToken + rank(g), rank = the
// lexicographic index of (g(0), .., g(4)) among the 120 permutations (rank 0 = identity).
// Batch (T = n): tokens[b,t] = g_{t+1}, targets[b,t] = p_{t+1}, mask = 1, answer[b,t] = t (each
// position is its own answer), hops = -1. No kBegin: position 0 predicts g_1 itself.
//
// Training lengths (the length curriculum 4..L, L = spec.length, paper: L = 18): each batch draws
// n uniformly in [kS5MinLength, L_p], L_p = 4 + (L - 4)(p + 1) / P for curriculum phase p of P
// (tasks.h; P = curriculum_phases, default 4; L_p = L with the curriculum off). Evaluation
// uses the full length L; s5_eval_batch draws any length (length generalisation, e.g. up to 180).
//
// Smaller symmetric groups (spec.elements = n in [2, 5], default 5): the same task over S_n's n!
// permutations (tokens kFirstContentToken + rank, rank lexicographic over the first n entries).
// Why: on this CPU no model learns S5's 120 x 120 product table (docs/log/results-2026-11.md, "S5"), so the
// length generalisation Fig. 3 is about cannot be seen on S5 itself; S3 (6 elements, the smallest
// non-abelian group) and S4 (24) have tables a small model learns, so the comparison can be run.
//
// Not supported: other groups (A5, cyclic groups), n > 5, rows of different lengths in one batch.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mixlab/train/tasks.h"

namespace mixlab {

constexpr int64_t kS5Elements = 120;  // |S5|
constexpr int64_t kS5MinVocab = kFirstContentToken + kS5Elements;
constexpr int64_t kS5MinLength = 4;
constexpr int64_t kSnMinElements = 2;  // spec.elements range: S2 .. S5
constexpr int64_t kSnMaxElements = 5;

using S5Perm = std::array<int, 5>;  // for S_n (n < 5) the entries [n, 5) are n..4, fixed

/// n! (the order of S_n); throws mixlab::Error for n outside [2, 5].
int64_t sn_order(int64_t n);
/// The permutation of S_n of rank r (lexicographic over the first n entries), 0 <= r < n!.
S5Perm sn_permutation(int64_t n, int64_t rank);
/// Rank of a · b in S_n (a first, then b).
int64_t sn_compose(int64_t n, int64_t a, int64_t b);
/// Smallest vocabulary of the task: the 4 specials + spec.elements! permutations.
int64_t s5_min_vocab(const TaskSpec& spec);

/// The permutation of rank r (lexicographic), 0 <= r < 120.
S5Perm s5_permutation(int64_t rank);
/// Lexicographic rank of a permutation of {0..4}.
int64_t s5_rank(const S5Perm& p);
/// Rank of a · b (a first, then b).
int64_t s5_compose(int64_t a, int64_t b);

/// Throws mixlab::Error naming the field: elements outside [2, 5], vocab < s5_min_vocab, length < 1.
void s5_validate(const TaskSpec& spec);
/// A batch of rows of length n >= 1 (any n, also beyond spec.length); rows drawn from `seed`.
Batch s5_generate(const TaskSpec& spec, int64_t batch_size, int64_t n, uint64_t seed);
/// Training batch with the length curriculum above.
Batch s5_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, int64_t total_steps, uint64_t seed);
/// Held-out batch `index` at length n (a seed stream disjoint from training).
Batch s5_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t n, int64_t index, uint64_t seed);

/// Error of a predictor at one evaluation length (Fig. 3: error rate against sequence length).
struct S5LengthError {
  int64_t length = 0;
  int64_t rows = 0;
  double final_error = 0;  // fraction of rows whose last position (the whole product) is wrong
  double token_error = 0;  // fraction of all positions (every prefix) that are wrong
};

/// tokens (B,T) int64 -> logits (B,T,V); e.g. a DecoderModel's forward under NoGradGuard.
using S5Predictor = std::function<torch::Tensor(const torch::Tensor& tokens)>;

/// Evaluates `predict` (argmax over the logits) on `rows` held-out rows at each length, in
/// batches of at most `batch_size`. Lengths may exceed spec.length (length generalisation).
std::vector<S5LengthError> s5_error_by_length(const S5Predictor& predict, const TaskSpec& spec,
                                              const std::vector<int64_t>& lengths, int64_t rows, int64_t batch_size,
                                              uint64_t seed);

/// Writes "length,rows,final_error,token_error" rows (the layout of Fig. 3's curves).
void s5_error_csv_write(const std::string& path, const std::vector<S5LengthError>& errors);

}  // namespace mixlab
