// mixlab/train/task_mad.h — the MAD synthetic tasks (Poli et al. 2024, "Mechanistic Design and
// Scaling of Hybrid Architectures"; reference generators: athms/mad-lab, mad/data/instances.py):
// in-context recall, noisy and fuzzy in-context recall, memorization and compression.
// Selective copying, MAD's sixth task, is in task_selective_copy.h (it is also Mamba's).
//
// Vocabulary (V = spec.vocab): the specials of tasks.h come first (0 kPad, 2 kSep, 3 kNoise are
// used here; MAD puts its specials at the top of the vocabulary instead), content tokens are
// [4, V). Where MAD splits its non-special tokens into keys and values, so does mixlab:
// C content tokens, keys [4, 4 + C/2), values [4 + C/2, 4 + C). So MAD's vocab_size v maps to
// mixlab vocab v + 4 (recall, noisy recall), v + 3 (fuzzy recall, compression: MAD spends one
// token on a pad / compression token that is a special here) or v + 3 (memorization: likewise).
//
// mad_recall (MAD in-context recall, multi_query = True, its benchmark setting), S = spec.length
// (MAD seq_len, even):
//   MAD builds S tokens: S/2 - 1 "pair slots" "k v" (k uniform over the keys WITH repeats; a key
//   seen before in the row shows its first value again, a new key gets a uniform value; values
//   of different keys may coincide), then a probe "k v" with k uniform over the keys already
//   shown. Inputs are the first S - 1 tokens (T = S - 1), each position predicts the next one.
//   Scored (MAD's test targets): every position holding a key that was shown earlier in the row
//   (target: its value), and the probe key (the last position). One answer per scored position.
// mad_noisy_recall: mad_recall where each pair slot is, with probability spec.noise_frac, two
//   tokens drawn uniformly from the noise tokens (the last spec.noise_vocab content tokens, never
//   keys or values) instead of a pair; never scored. One slot (uniform among the first S/2 - 1)
//   is always a pair, so the probe has a key to ask for (MAD draws that slot among all S/2, so
//   a row of only noise is possible there, and its generator then fails).
// mad_fuzzy_recall (MAD fuzzy in-context recall): keys are 1..key_len distinct key tokens, values
//   1..value_len distinct value tokens (MAD: permutations of the key / value tokens), sizes
//   uniform; a key is the whole run of key tokens (keys and values use disjoint tokens, so the
//   boundaries are in the row). Training rows draw key sizes in 1..key_len, held-out rows always
//   key_len (MAD: "we always prompt at the maximum key motif size"). A probe pair is placed in
//   the context and repeated at the end; pairs are added while they fit, the rest of the row is
//   kPad at its start. T = S. Scored: every value token of a key shown before, predicted from the
//   position before it (the last key token or the previous value token); one answer per value.
//   MAD places the probe at a position drawn up to S - 2 (probe size) and may end the context
//   before reaching it (then the final probe is unanswerable); here the position is drawn in
//   [0, S - probe - 2 (key_len + value_len)], which the context always reaches.
// mad_memorization (MAD memorization): a fixed map key -> value (a random one-to-one map of all
//   keys onto distinct values, drawn from spec.map_seed; the same for training and evaluation).
//   Row: S/2 pairs "k kSep" (k uniform WITH repeats; kSep is MAD's insert token); the kSep
//   position is scored with the value of the key before it. T = S. Nothing in the row says what
//   the value is: the model must store the map in its weights. MAD trains on 256 fixed rows
//   (12 800 for the other tasks); here every batch is new (the map is what is learned).
// mad_compression (MAD compression, adapted): m = S - 1 content tokens (uniform) and the
//   compression token kSep, then m - 1 blanks kNoise:  [x_1 .. x_m kSep kNoise x (m - 1)],
//   T = 2m; the kSep position is scored with x_1, the i-th blank with x_{i+1}. One answer per row.
//   MAD trains an autoencoder: the mixer stack reads [x_1 .. x_m C], only the last position's
//   vector is kept, and an MLP decodes each x_i from it plus a position embedding. A causal
//   next-token model has no such bottleneck vector, so here the reconstruction follows the
//   compression token in the same causal stream and reads the prefix only through the mixer:
//   for a recurrence (ssm, mamba, gla, ...) everything must pass through its fixed-size state
//   after kSep, which is what MAD's task measures; for attention (whose cache is the whole
//   prefix) the task becomes copying at a fixed offset and is no test of compression. MAD also
//   scores the reconstruction of C itself (always C); not here.
//
// Evaluation rows come from a seed stream disjoint from training (tasks.cpp); there is no
// curriculum (MAD trains at one length; curriculum settings are ignored).
//
// Not supported: MAD's single-query variants (multi_query = False), noise in fuzzy recall,
// memorization or compression (MAD's defaults have none), multi-token memorization keys.
#pragma once

#include <cstdint>
#include <string>

#include "mixlab/train/tasks.h"

namespace mixlab {

/// True for mad_recall, mad_noisy_recall, mad_fuzzy_recall, mad_memorization, mad_compression.
bool mad_is_task(const std::string& name);

/// Throws mixlab::Error naming the field: length odd or too short, vocab too small for the keys,
/// values (and noise tokens), noise_frac outside [0, 1), key_len/value_len < 1 or larger than
/// the key/value tokens allow.
void mad_validate(const TaskSpec& spec);

/// T of a row at MAD length S: recall/noisy S - 1, fuzzy/memorization S, compression 2 (S - 1).
int64_t mad_sequence_length(const TaskSpec& spec, int64_t length);

/// Smallest length the task accepts.
int64_t mad_min_length(const TaskSpec& spec);

/// A batch at spec.length; `eval` selects held-out rows (fuzzy recall: keys at key_len).
Batch mad_generate(const TaskSpec& spec, int64_t batch_size, uint64_t seed, bool eval);

/// mad_memorization's map: value token of every key token (index k - 4), from spec.map_seed.
std::vector<int64_t> mad_memorization_map(const TaskSpec& spec);

}  // namespace mixlab
