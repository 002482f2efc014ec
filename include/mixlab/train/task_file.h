// mixlab/train/task_file.h — the `file` task: rows read from a NumPy file that any program wrote
// (zoology's MQAR generator, MAD's tasks, examples/zoology_mqar.py), so a task defined in Python
// trains without a C++ generator.
//
// Data (spec.data, `--set data=PATH`; read by mixlab/data/npy.h):
//   .npz  arrays `inputs` (N,T) and `labels` (N,T), integers. labels[n,t] = -100 means position t
//         is not scored (zoology's convention, PyTorch's cross_entropy(ignore_index=-100)); any
//         other value is the token position t must predict. Other arrays are ignored.
//   .npy  one (N,T+1) array of token sequences, read as next-token prediction: inputs = columns
//         [0,T), labels = columns [1,T] (every position scored).
//   Element types int8/16/32/64, uint8/16/32/64, little-endian, C order.
// Held-out rows: spec.eval_data (`--set eval_data=PATH`, same format and the same T), else the
//   last E = max(1, floor(N / 10)) rows of the data; training uses the first N - E (N >= 2).
// Batch (tasks.h): tokens = inputs, targets = labels where scored else 0, mask = (labels !=
//   -100), answer = 0 on scored positions and -1 elsewhere: one answer per row, so token
//   accuracy is zoology's per-position accuracy and whole-answer accuracy is the fraction of rows
//   with every scored position right; hops = -1; length = T, pairs = 0.
// Vocabulary: V = max over inputs and labels of both files + 1, unless spec.vocab is set
//   explicitly (`vocab` config key), which must cover the data. Length: spec.length = T of the
//   file; a `length` config key that differs from T is an error (leave it unset).
// Training rows: epochs over the N_train rows, each epoch in its own order. Row b of step s is
//   entry (s*B + b) mod N_train of epoch (s*B + b) / N_train's permutation (Fisher–Yates from
//   (seed, epoch)): a pure function of (seed, step, batch size), so --resume is bit-exact.
// Evaluation: every held-out row once, in file order: batch i holds rows [i*B, min((i+1)*B, E));
//   task_eval_batch_count gives ceil(E / B) (the `eval_batches` key does not apply).
// Checks (each a mixlab::Error naming the file and what was expected and found): file not an
//   .npy/.npz, dtype, rank (2-D), inputs/labels shape mismatch, labels outside [0, V) other than
//   -100, inputs outside [0, V), a missing array, zero rows or positions, a row with no scored
//   position, a held-out split that leaves no training row, an eval file of another T.
// The arrays are read once per process per (data, eval_data) and shared, read-only, by every
// thread (compare runs several trainers at once): 16 bytes per token (inputs and labels, int64).
//
// Not supported: rows of different lengths (pad them and label the padding -100), an eval file
// of another T, the curriculum (ignored: the file fixes the rows), length sweeps.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixlab/train/tasks.h"

namespace mixlab {

/// The label value of a position that is not scored.
constexpr int64_t kFileTaskIgnoreLabel = -100;

struct FileTaskData {
  std::string data, eval_data;               // the paths read (eval_data empty: held-out split)
  torch::Tensor train_inputs, train_labels;  // (N_train,T) int64
  torch::Tensor eval_inputs, eval_labels;    // (E,T) int64
  int64_t T = 0;
  // The largest token id in inputs and labels (both files), where it is: vocab must exceed it.
  int64_t max_id = 0;
  std::string max_where;  // e.g. "array 'labels' of 'x.npz', row 3, column 7"
};

/// The rows of `data` (and `eval_data`), read and checked once per process. Throws
/// mixlab::Error (mixlab::IoError when a file cannot be opened) naming the file.
std::shared_ptr<const FileTaskData> file_task_data(const std::string& data, const std::string& eval_data);

/// Config resolution (config.cpp): makes the paths absolute (a checkpoint finds its data from any
/// directory), reads the file, sets spec.length = T (an explicit different length is an error)
/// and, when `vocab_given` is false, spec.vocab = max id + 1. `origin` names the config.
void file_task_configure(TaskSpec& spec, bool length_given, bool vocab_given, const std::string& origin);

/// Checks data is set and readable and vocab covers it (and length == T).
void file_task_validate(const TaskSpec& spec);

/// Training batch of `step` (rows drawn as above).
Batch file_task_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed);

/// Held-out batch `index` in [0, file_task_eval_batch_count): rows [index*B, min((index+1)*B, E)).
Batch file_task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index);

/// ceil(E / batch_size): the batches that cover the held-out rows once.
int64_t file_task_eval_batch_count(const TaskSpec& spec, int64_t batch_size);

/// The order of the training rows in `epoch`: a permutation of [0, rows) from (seed, epoch).
std::vector<int64_t> file_task_epoch_order(int64_t rows, uint64_t seed, int64_t epoch);

}  // namespace mixlab
