// mixlab/train/mqar.h — multi-query associative recall rows (MQAR; Arora et al. 2024a, the
// "zoology" benchmark) and the multi-hop variant built on them (seed 000 §5.2, App. C.1).
//
// One row of length S with n key–value pairs (S sequence length, n pairs, Q queries):
//
//   [kBegin  context  kSep  q_1 q_2 .. q_Q]                               S tokens
//
//   free tokens  F = S - 2 - 2n   (requires F >= 1: at least one query)
//   fillers      g = floor(F / 2) kNoise tokens inside the context
//   queries      Q = ceil(F / 2)
//   context      the n pairs "k_i v_i" and the g fillers as n + g units in a uniformly random
//                order (App. C.1: "randomize more the position of the keys and values"), so a
//                pair starts at any position and pairs are not contiguous.
//   keys         n distinct tokens of [4, 4 + K), K = (V - 4) / 2
//   values       n distinct tokens of [4 + K, V): the key and value sets are disjoint
//   queries      Q keys drawn uniformly WITH repeats from the n stored keys (seed 004 §4.2: no
//                bias towards recently stored keys); a key may be queried 0, 1 or several
//                times, so the set of answers already given says nothing about the next one
//                (answering by elimination earns nothing).
//   scoring      each query position is scored with the value of its key; the answer is a
//                label, never an input (the next input is the next query).
//
// Multi-hop (hop_prob = p > 0): pair i (i >= 1 in context order) stores, with probability p,
// the key of a uniformly chosen earlier pair j < i instead of its value (a link). Resolving a
// key follows links until a real value; a query is scored with the resolved value and records
// its number of links (hops, 0 = the stored value). The labels on intermediary keys (App. C.1):
// the context position holding a link key is scored with the value that link resolves to.
// Values are still drawn distinct for all n pairs; a pair that links simply does not show its.
//
// Output per row (all S long):
//   tokens   inputs
//   targets  the next input token; on scored positions the label (query answer or link label).
//            The last position is always a query, so no target falls outside the row.
//   scored   1 on queries and link labels
//   answer   query index 0..Q-1 on query positions, -1 elsewhere (link labels belong to no answer)
//   hops     links behind a query's answer (0 = direct), -1 outside queries
//
// Deliberate differences from zoology's multiquery_ar generator (checked against it by
// reading; golden rows in tests/train/mqar_test.cpp):
//   - zoology puts the n pairs contiguously at the start; here they sit among fillers at random
//     positions (App. C.1).
//   - zoology queries every key exactly once, at gaps drawn from a power law favouring short
//     gaps; here queries are drawn uniformly with repeats and written back to back (seed 004
//     §4.2), so the row has Q ≈ F/2 queries instead of n.
//   - zoology fills non-query positions with random tokens of the whole vocabulary; here
//     fillers are kNoise (one token) and there are no fillers between queries.
//   - zoology has no special tokens and splits the vocabulary in halves [1, V/2) / [V/2, V);
//     here 4 special tokens come first and the rest is split in halves.
//   - multi-hop links and their labels do not exist in zoology (seed 000 App. C.1).
//   Same as zoology: distinct keys, distinct values, disjoint key and value sets, the answer
//   is only a label.
//
// Cost: O(S) per row. Not supported: several passes over the pairs (zoology's num_passes), a
// power-law query distribution.
#pragma once

#include <cstdint>
#include <vector>

#include "mixlab/train/task_rng.h"

namespace mixlab {

struct MqarLayout {
  int64_t fillers = 0;  // g: kNoise tokens in the context
  int64_t queries = 0;  // Q
};

struct MqarRow {
  std::vector<int64_t> tokens, targets, answer, hops;  // (S) each, see above
  std::vector<uint8_t> scored;                         // (S)
};

/// Key tokens available at vocabulary V: (V - 4) / 2 (the values get the rest, at least as many).
int64_t mqar_key_count(int64_t vocab);
/// Most pairs a row of length S holds with at least one query: (S - 3) / 2.
int64_t mqar_max_pairs(int64_t length);
/// Fillers and queries of a row (requires 1 <= pairs <= mqar_max_pairs(length)).
MqarLayout mqar_layout(int64_t length, int64_t pairs);
/// Throws mixlab::Error naming `what` (e.g. "task recall") when the pairs do not fit the length,
/// the vocabulary is too small for n distinct keys and n distinct values from disjoint sets, or
/// hop_prob is outside [0, 1].
void mqar_validate(const char* what, int64_t vocab, int64_t length, int64_t pairs, double hop_prob);
/// One row; draws from `rng` only. hop_prob = 0 gives plain MQAR.
MqarRow mqar_row(int64_t vocab, int64_t length, int64_t pairs, double hop_prob, TaskRng& rng);

}  // namespace mixlab
