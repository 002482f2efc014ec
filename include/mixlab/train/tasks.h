// mixlab/train/tasks.h — synthetic sequence tasks generated on the fly (seed 000 §5.2, App. C.1).
//
// Every batch is a pure function of (task spec, batch size, step or index, seed): nothing is
// stored, so training resumes bit-exactly from a step number and evaluation batches are drawn
// from a separate seed stream that training never touches.
//
// Batch format (B batch, T time):
//   tokens  (B,T) int64  model input
//   targets (B,T) int64  what each position predicts: the next token, except on recall/multihop
//                        scored positions, whose target is a label (the query's answer, or a
//                        link label) that is never an input
//   mask    (B,T) float  1 on scored positions (the only positions in the loss and the accuracy)
//   hops    (B,T) int64  on query positions of recall/multihop: the links the answer follows
//                        (0: the stored value itself, k >= 1: a chain of k links); -1 elsewhere
//   answer  (B,T) int64  index of the query or copied sequence a scored position belongs to within
//                        its row, -1 elsewhere (whole-answer accuracy: an answer counts when all
//                        its tokens are right). Multihop link labels are scored but belong to no
//                        answer, so whole-answer accuracy there is the accuracy of the queries.
// All rows of one batch have the same length T and the same number of pairs; lengths vary
// between batches (see "Curriculum").
//
// Vocabulary layout (V = spec.vocab, V >= 8):
//   0 kPad    padding (never scored)
//   1 kBegin  first token of every sequence
//   2 kSep    end of the copied sequence (copy) / end of the context (recall, multihop)
//   3 kNoise  filler between key–value pairs in the context (recall, multihop)
//   4 .. V-1  content tokens. copy draws from all of them. recall/multihop split them in two
//             disjoint sets: keys = [4, 4 + K), K = (V - 4) / 2, values = [4 + K, V)
//
// copy (length n):   [kBegin x_1 .. x_n kSep x_1 .. x_n]          T = 2n + 1
//   The last x_n is never an input, so T = 2n+1 positions; the answer is the second copy:
//   positions n+1 .. 2n (the kSep and the copied tokens x_1..x_{n-1}) predict x_1 .. x_n.
//   One answer per row (whole-answer accuracy = the whole sequence copied exactly).
//
// recall (length S, n pairs): multi-query associative recall in the MQAR format
//   (mixlab/train/mqar.h has the full layout and its differences from zoology):
//   [kBegin  context  kSep  q_1 .. q_Q]                            T = S
//   context = n pairs "k v" (distinct keys, distinct values) at random positions among
//   g = floor((S - 2 - 2n) / 2) kNoise fillers; Q = ceil((S - 2 - 2n) / 2) queries, each a key
//   drawn uniformly WITH repeats from the stored keys and scored with its value (a label: the
//   next input is the next query). One answer per query. Needs n <= (S - 3) / 2 and
//   V >= 4 + 2n.
// multihop: as recall, but the value of pair i (i >= 1, context order) is replaced with
//   probability spec.hop_prob by the key of a uniformly chosen earlier pair j < i (a link).
//   Resolving a key follows links until a real value. A query is scored with the resolved
//   value, so the model must follow the whole chain in one position (seed 000 §5.2: a chain of
//   associative recalls); `hops` holds the number of links. The labels on intermediary keys
//   (App. C.1) sit in the context: the position holding a link key is scored with the value
//   that link resolves to (answer = -1). They teach the model to resolve chains while it reads
//   the context, which is the state tracking a recurrence can do in one hop per link and a
//   fixed stack of attention layers only up to its depth.
//
// textcopy (length L, seed 003 §6.5): a span of L byte tokens of a Brown corpus document,
//   repeated once without a delimiter (mixlab/data/textcopy.h): T = 2L - 1, the mask covers the
//   L predictions of the second copy, one answer per row. Needs vocab >= 256. Training draws
//   from the train documents, evaluation from the held-out validation documents. The corpus is
//   read once per process from $MIXLAB_DATA_DIR, else ./data/brown (installed by
//   scripts/setup.sh), else ./data/sample (five documents shipped in the repository).
//
// lm (window T = length): next-token prediction on Brown, on any plain-text corpus (corpus=) or
//   on nanoGPT token files (tokens=), with the bytes, gpt2 or ids tokeniser (mixlab/train/task_lm.h); every position is
//   scored. Training draws windows of the train stream; the trainer evaluates perplexity and bits per byte on the valid
//   stream (mixlab/train/lm_eval.h); task_eval_batch gives random windows of the valid stream.
//
// file (--set data=PATH): rows of a NumPy .npz (arrays inputs and labels, N x T, labels -100
//   where not scored) or .npy written by any program, e.g. examples/zoology_mqar.py
//   (mixlab/train/task_file.h). T, and unless given the vocabulary, come from the file; the
//   held-out rows are eval_data's, else the last max(1, N/10) rows. One answer per row; every
//   evaluation covers all held-out rows once (task_eval_batch_count). No curriculum.
//
// The MAD suite (Poli et al. 2024; mixlab/train/task_mad.h) and the two classics
//   (task_selective_copy.h, task_induction.h): one length per task (no curriculum), T as listed,
//   scored positions where MAD (or H3 / Mamba) score. Default sizes are scaled to a 2-core CPU
//   where the paper's are larger (config.cpp holds the defaults; docs/log/results-2026-11.md the
//   measurements behind them):
//     task               T            default (mixlab)                       paper
//     mad_recall         S - 1        vocab 20, S = 32                       MAD vocab 16, S = 128
//     mad_noisy_recall   S - 1        vocab 36, S = 32, noise 16 tokens, 0.2  MAD vocab 32 (16 noise), S = 128
//     mad_fuzzy_recall   S            vocab 19, S = 64, keys/values <= 3     MAD vocab 16, S = 128, 3/3
//     selective_copy     S            vocab 18, S = 64, 8 tokens             MAD vocab 16, S = 256, 16
//     mad_compression    2 (S - 1)    vocab 19, S = 32                       MAD vocab 16, S = 32
//     mad_memorization   S            vocab 259, S = 32                      MAD vocab 256, S = 32
//     induction          S + 1        vocab 20, S = 64                       Mamba vocab 16, S = 256
//   (mixlab's vocab counts its 4 special tokens; MAD's counts its own specials: task_mad.h maps
//   the two). Task-only fields: noise_frac, noise_vocab (mad_noisy_recall), key_len, value_len
//   (mad_fuzzy_recall), copy_tokens (selective_copy), map_seed (mad_memorization).
//   Training is on the scored positions only (MAD, H3 and Mamba train recall-type rows on every
//   next token, most of which are random and unlearnable; the learnable part is the same).
//
// Curriculum (App. C.1): training is split in P = curriculum_phases equal phases (default 4);
// phase p uses the length and the pair count divided by 2^(P-1-p), so 8, 4, 2, 1 for P = 4 and
// 2, 1 for P = 2 (at least the task's minimum). Fewer phases suit a model whose smallest useful
// length is large: T-PSM with chunk c learns nothing about its state below length 2c, so the
// default's first two phases at T = 4c never reach the state (docs/log/results-2026-11.md, T-PSM MQAR
// across chunks). s5 divides its length range instead (mixlab/train/task_s5.h). Within a phase
// each batch draws its length uniformly in [ceil(L_p / 2), L_p] and its pair count uniformly in
// [ceil(P_p / 2), P_p] (clamped so that a query fits). `min_length` > 0 moves the length range to
// [min(min_length, L_p), L_p] (min_length = L: every training row at the full length; on copy
// that is one fixed offset, which even local attention routes: docs/log/results-2026-11.md, "The
// copy tier at one length"). Evaluation batches always use the full length L and pair count P.
//
// Not supported: variable lengths inside one batch (rows share T so no compute is spent on
// padding), tasks other than those in task_names().
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

constexpr int64_t kTokenPad = 0;
constexpr int64_t kTokenBegin = 1;
constexpr int64_t kTokenSep = 2;
constexpr int64_t kTokenNoise = 3;
constexpr int64_t kFirstContentToken = 4;
constexpr int64_t kMaxCurriculumPhases = 8;  // the first phase trains at length / 128

struct TaskSpec {
  std::string name = "copy";        // one of task_names()
  int64_t vocab = 64;               // V
  int64_t length = 16;              // copy/textcopy: longest copied span L; recall/multihop: sequence length S
  int64_t pairs = 8;                // recall/multihop: most key–value pairs P (ignored by copy)
  double hop_prob = 0.5;            // multihop: probability that a value is a link to an earlier key
  bool curriculum = true;           // curriculum_phases equal phases growing length and pairs
  int64_t min_length = 0;           // copy/recall/multihop/textcopy: shortest training length (0 = half of it)
  int64_t curriculum_phases = 4;    // P, 1..8: phase p trains at length and pairs / 2^(P-1-p)
  int64_t elements = 5;             // s5: n of the symmetric group S_n, 2..5 (mixlab/train/task_s5.h)
  std::string tokenizer = "bytes";  // lm: bytes | gpt2 | ids (task_lm.h: how vocab follows it)
  std::string corpus;               // lm: a plain-text corpus (folder or file, text_corpus.h); "" = Brown
  std::string tokens;               // lm: a folder holding nanoGPT's train.bin and val.bin; "" = none
  std::string data;                 // file: the .npz/.npy of rows (absolute once configured)
  std::string eval_data;            // file: held-out rows; empty = the last max(1, N/10) rows of data
  // MAD suite and the classics (task_mad.h, task_selective_copy.h, task_induction.h); each applies
  // to the task named before it only (config.cpp rejects another value on other tasks).
  double noise_frac = 0.2;    // mad_noisy_recall: probability that a pair slot holds 2 noise tokens (MAD frac_noise)
  int64_t noise_vocab = 16;   // mad_noisy_recall: content tokens used only as noise (MAD noise_vocab_size)
  int64_t key_len = 3;        // mad_fuzzy_recall: longest key in tokens (MAD k_motif_size)
  int64_t value_len = 3;      // mad_fuzzy_recall: longest value in tokens (MAD v_motif_size)
  int64_t copy_tokens = 8;    // selective_copy: tokens to copy (MAD num_tokens_to_copy: 16)
  uint64_t map_seed = 12345;  // mad_memorization: seed of the fixed key -> value map (MAD: its run seed, 12345)
};

struct Batch {
  torch::Tensor tokens;   // (B,T) int64
  torch::Tensor targets;  // (B,T) int64
  torch::Tensor mask;     // (B,T) float32
  torch::Tensor answer;   // (B,T) int64, -1 outside answers
  torch::Tensor hops;     // (B,T) int64, links behind a query's answer, -1 outside queries
  int64_t length = 0;     // the task length used (copy: n, recall/multihop: S)
  int64_t pairs = 0;      // the pair count used (0 for copy)
};

/// Names of the built-in tasks, in table order.
const std::vector<std::string>& task_names();

/// Throws mixlab::Error naming the field when the spec is invalid (unknown task, vocab too
/// small for the pairs, length below the task's minimum, ...).
void task_validate(const TaskSpec& spec);

/// Sequence length T of a batch at task length `length` (copy: 2n+1, others: S).
int64_t task_sequence_length(const TaskSpec& spec, int64_t length);

/// A batch at an explicit length and pair count; rows drawn from `seed`.
Batch task_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, int64_t pairs, uint64_t seed);

/// Training batch of step `step` (0-based) out of `total_steps`, curriculum applied.
Batch task_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, int64_t total_steps, uint64_t seed);

/// The two held-out sets of a task. A run reports one (task_report_split); `compare --lr` chooses
/// the learning rate on kValid and reports kTest, so the figure shown is not the one the choice
/// was made on (mixlab/train/compare.h), and `stop_at` decides on kValid (trainer.h).
///   generated tasks (copy, recall, multihop, s5, textcopy):
///     kTest   seed stream 3 (textcopy: spans of the held-out validation documents); what runs report
///     kValid  seed stream 4, disjoint draws of the same held-out distribution
///   lm:   kValid the valid stream (what runs report), kTest the test stream (Brown's 80/10/10;
///         corpus=: the same split; tokens=: test.bin, an error naming it when absent)
///   file: one held-out set (eval_data, else the last rows): kTest; kValid is an error naming it.
enum class EvalSplit { kValid, kTest };
const char* eval_split_name(EvalSplit split);  // "valid" | "test"

/// The split a run evaluates and reports: kValid for lm, kTest for every other task.
EvalSplit task_report_split(const TaskSpec& spec);

/// Held-out batch number `index` at the full length and pair count of `split` (a seed stream
/// disjoint from training batches and from the other split); the first form reads
/// task_report_split(spec).
Batch task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index, uint64_t seed);
Batch task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index, uint64_t seed, EvalSplit split);

/// Held-out batches one evaluation reads: `eval_batches`, except for task file, whose evaluation
/// covers its held-out rows once: ceil(E / batch_size) batches, the last one shorter.
int64_t task_eval_batch_count(const TaskSpec& spec, int64_t batch_size, int64_t eval_batches);

/// Number of curriculum phases: spec.curriculum_phases, or 1 when the curriculum is off.
int task_phase_count(const TaskSpec& spec);

/// Curriculum phase (0 .. task_phase_count - 1) of `step`: the steps are split into equal
/// phases, and the last phase trains at the full length and pair count.
int task_phase(const TaskSpec& spec, int64_t step, int64_t total_steps);

/// The shortest length a copy/recall/multihop/textcopy training batch draws at phase length
/// `phase_length` (lengths are uniform in [this, phase_length]): min(min_length, phase_length)
/// when min_length is set, else ceil(phase_length / 2); never below the task's minimum.
int64_t task_shortest_train_length(const TaskSpec& spec, int64_t phase_length);

/// Deterministic 64-bit mixing of a seed with a stream and an index (splitmix64 based).
uint64_t task_seed_mix(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace mixlab
