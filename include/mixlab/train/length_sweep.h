// mixlab/train/length_sweep.h — a trained model's error against sequence length: seed 004 Fig. 3
// (S5: train on lengths up to 18, evaluate up to 180, length generalisation) and Fig. 4 (MQAR:
// error per length, in distribution).
//
// For each length L the model reads `rows` held-out rows of the task at task length L (s5: L
// permutations; recall / multihop: sequence length L with the spec's pair count; copy: a copied
// sequence of L tokens, T = 2L + 1) and is scored on the answer positions as in training
// (trainer.h batch_score): token error = wrong answer tokens / answer tokens, answer error =
// wrong whole answers / answers (s5: every position is an answer, so both are the per-position
// error; recall: per query), final error = rows whose last scored position is wrong (s5: the
// state after all L permutations, the quantity of Fig. 3). Rows come from a seed stream of their own, disjoint from
// training and from the trainer's evaluation batches, and are the same for every model given the same seed, so models
// are compared on identical rows.
//
// Lengths may exceed what the model trained on, up to its max_len (config key max_len).
// Not supported: lm and textcopy (lm has its own sliding-window evaluation, lm_eval.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixlab/model/model.h"
#include "mixlab/train/tasks.h"

namespace mixlab {

struct LengthError {
  int64_t length = 0;       // task length L
  int64_t rows = 0;         // rows evaluated
  double token_error = 0;   // fraction of answer tokens predicted wrong (argmax)
  double answer_error = 0;  // fraction of whole answers with any token wrong
  double final_error = 0;   // fraction of rows whose last scored position is wrong (s5: the
                            // whole product g_1 ... g_L, Fig. 3's error at length L)
};

/// Evaluates `model` (under NoGradGuard, eval mode) at every length in `lengths`, in batches of at
/// most `batch_size` rows. Throws mixlab::Error naming the argument when: the task is lm or
/// textcopy, `lengths` is empty, a length is below the task's minimum, a sequence would exceed
/// the model's max_len, the pairs do not fit a recall / multihop length, or rows / batch_size < 1.
std::vector<LengthError> length_sweep(DecoderModel& model, const TaskSpec& spec, const std::vector<int64_t>& lengths,
                                      int64_t rows, int64_t batch_size, uint64_t seed);

/// The checks of length_sweep that need no model (task, lengths, max_len), so that a driver can
/// refuse a bad sweep before training.
void length_sweep_check(const TaskSpec& spec, const std::vector<int64_t>& lengths, int64_t max_len);

/// Parses "4,8,16" or ranges "19-180/20" (from 19 to 180 in steps of 20, 180 included) into
/// sorted distinct lengths >= 1. Throws mixlab::Error naming `what` and the bad item.
std::vector<int64_t> length_list_parse(const std::string& text, const std::string& what);

}  // namespace mixlab
