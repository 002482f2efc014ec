// The `file` task: rows of a NumPy file as batches (mixlab/train/task_file.h).
#include "mixlab/train/task_file.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>

#include "mixlab/core/error.h"
#include "mixlab/data/npy.h"
#include "mixlab/train/task_rng.h"

namespace mixlab {
namespace {

constexpr uint64_t kEpochStream = 0x46494C45;  // "FILE": the epoch orders' seed stream (task_seed_mix)

// One file's rows, checked: (N,T) int64 inputs and labels.
struct Rows {
  torch::Tensor inputs, labels;
  int64_t max_id = 0;
  std::string max_where;
};

torch::Tensor to_tensor(const NpyArray& a) {
  return torch::from_blob(const_cast<int64_t*>(a.values.data()), {a.shape[0], a.shape[1]}, torch::kInt64).clone();
}

void check_2d(const NpyArray& a, const std::string& what, const char* expected) {
  MIXLAB_CHECK(a.shape.size() == 2, "{}: must be 2-D ({}), got shape {}", what, expected, a.shape_string());
}

// Range checks on every element, and the largest id (vocab must exceed it).
void check_values(Rows& r, const std::string& path, const std::string& inputs_what, const std::string& labels_what) {
  const int64_t N = r.inputs.size(0), T = r.inputs.size(1);
  const int64_t* in = r.inputs.data_ptr<int64_t>();
  const int64_t* lab = r.labels.data_ptr<int64_t>();
  r.max_id = -1;
  for (int64_t n = 0; n < N; ++n) {
    bool scored = false;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t x = in[n * T + t], y = lab[n * T + t];
      MIXLAB_CHECK(x >= 0, "{}: has {} at row {}, column {}; expected token ids >= 0", inputs_what, x, n, t);
      MIXLAB_CHECK(y >= 0 || y == kFileTaskIgnoreLabel,
                   "{}: has {} at row {}, column {}; expected -100 (not scored) or a token id >= 0", labels_what, y, n,
                   t);
      scored = scored || y >= 0;
      if (x > r.max_id) r.max_id = x, r.max_where = fmt::format("{}, row {}, column {}", inputs_what, n, t);
      if (y > r.max_id) r.max_id = y, r.max_where = fmt::format("{}, row {}, column {}", labels_what, n, t);
    }
    MIXLAB_CHECK(scored,
                 "{}: row {} has no scored position (every label is -100); expected at least one label != -100 per "
                 "row",
                 path, n);
  }
}

Rows read_rows(const std::string& path) {
  const NpyFile f = NpyFile::read(path);
  Rows r;
  std::string inputs_what, labels_what;
  if (!f.is_npz()) {
    // One (N, T+1) array of sequences: next-token prediction.
    const NpyArray a = f.array();
    const std::string what = fmt::format("{}: the .npy array", path);
    check_2d(a, what, "N sequences x T+1 tokens, read as next-token prediction");
    MIXLAB_CHECK(a.shape[0] >= 1, "{}: has 0 rows; expected at least 1", what);
    MIXLAB_CHECK(a.shape[1] >= 2, "{}: rows of {} token(s); expected T+1 >= 2 tokens (inputs are the first T)", what,
                 a.shape[1]);
    const torch::Tensor seq = to_tensor(a);
    r.inputs = seq.narrow(1, 0, a.shape[1] - 1).contiguous();
    r.labels = seq.narrow(1, 1, a.shape[1] - 1).contiguous();
    inputs_what = labels_what = what;
  } else {
    for (const char* name : {"inputs", "labels"}) {
      if (f.contains(name)) continue;
      const auto have = f.names();
      MIXLAB_FAIL(
          "{}: .npz has no array '{}'; expected arrays 'inputs' and 'labels' (N x T integers, labels -100 where not "
          "scored), found {}",
          path, name, have.empty() ? std::string("no arrays") : fmt::format("{}", fmt::join(have, ", ")));
    }
    const NpyArray in = f.array("inputs"), lab = f.array("labels");
    inputs_what = fmt::format("{}: array 'inputs'", path);
    labels_what = fmt::format("{}: array 'labels'", path);
    check_2d(in, inputs_what, "N rows x T positions");
    check_2d(lab, labels_what, "N rows x T positions");
    MIXLAB_CHECK(in.shape == lab.shape, "{}: arrays 'inputs' {} and 'labels' {} must have the same shape (N, T)", path,
                 in.shape_string(), lab.shape_string());
    MIXLAB_CHECK(in.shape[0] >= 1, "{}: has 0 rows (shape {}); expected at least 1", inputs_what, in.shape_string());
    MIXLAB_CHECK(in.shape[1] >= 1, "{}: has 0 positions per row (shape {}); expected T >= 1", inputs_what,
                 in.shape_string());
    r.inputs = to_tensor(in);
    r.labels = to_tensor(lab);
  }
  check_values(r, path, inputs_what, labels_what);
  return r;
}

std::shared_ptr<const FileTaskData> load(const std::string& data, const std::string& eval_data) {
  auto d = std::make_shared<FileTaskData>();
  d->data = data;
  d->eval_data = eval_data;
  Rows main = read_rows(data);
  d->T = main.inputs.size(1);
  d->max_id = main.max_id;
  d->max_where = main.max_where;
  if (eval_data.empty()) {
    const int64_t N = main.inputs.size(0), E = std::max<int64_t>(1, N / 10);
    MIXLAB_CHECK(N - E >= 1,
                 "{}: has {} row(s): the held-out split (the last max(1, N/10) = {} rows) leaves no training row; "
                 "expected N >= 2 rows, or a separate eval file (--set eval_data=PATH)",
                 data, N, E);
    d->train_inputs = main.inputs.narrow(0, 0, N - E);
    d->train_labels = main.labels.narrow(0, 0, N - E);
    d->eval_inputs = main.inputs.narrow(0, N - E, E);
    d->eval_labels = main.labels.narrow(0, N - E, E);
    return d;
  }
  Rows held = read_rows(eval_data);
  MIXLAB_CHECK(held.inputs.size(1) == d->T,
               "{}: rows have T = {} positions but the data '{}' has T = {}; expected the same T", eval_data,
               held.inputs.size(1), data, d->T);
  d->train_inputs = main.inputs;
  d->train_labels = main.labels;
  d->eval_inputs = held.inputs;
  d->eval_labels = held.labels;
  if (held.max_id > d->max_id) d->max_id = held.max_id, d->max_where = held.max_where;
  return d;
}

Batch make_batch(const torch::Tensor& inputs, const torch::Tensor& labels) {
  Batch b;
  const auto scored = labels != kFileTaskIgnoreLabel;
  b.tokens = inputs;
  b.targets = torch::where(scored, labels, torch::zeros_like(labels));
  b.mask = scored.to(torch::kFloat32);
  b.answer = torch::where(scored, torch::zeros_like(labels), torch::full_like(labels, -1));
  b.hops = torch::full_like(labels, -1);
  b.length = inputs.size(1);
  b.pairs = 0;
  return b;
}

}  // namespace

std::shared_ptr<const FileTaskData> file_task_data(const std::string& data, const std::string& eval_data) {
  MIXLAB_CHECK(!data.empty(),
               "task file: no data file: set the key 'data' (--set data=PATH: an .npz with arrays 'inputs' and "
               "'labels', or an .npy of sequences)");
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const FileTaskData>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find({data, eval_data});
  if (it == loaded.end()) it = loaded.emplace(std::make_pair(data, eval_data), load(data, eval_data)).first;
  return it->second;
}

void file_task_configure(TaskSpec& spec, bool length_given, bool vocab_given, const std::string& origin) {
  MIXLAB_CHECK(!spec.data.empty(),
               "config {}: task file needs the key 'data': the .npz (arrays 'inputs' and 'labels') or .npy to train "
               "on (--set data=PATH)",
               origin);
  // Absolute: the config is stored in the checkpoint, and `mixlab eval` may run from elsewhere.
  namespace fs = std::filesystem;
  spec.data = fs::absolute(spec.data).lexically_normal().string();
  if (!spec.eval_data.empty()) spec.eval_data = fs::absolute(spec.eval_data).lexically_normal().string();
  const auto d = file_task_data(spec.data, spec.eval_data);
  MIXLAB_CHECK(!length_given || spec.length == d->T,
               "config {}: key 'length' is {} but the data '{}' has T = {} positions per row; leave 'length' unset "
               "(the file sets it)",
               origin, spec.length, spec.data, d->T);
  spec.length = d->T;
  if (!vocab_given) spec.vocab = d->max_id + 1;
}

void file_task_validate(const TaskSpec& spec) {
  const auto d = file_task_data(spec.data, spec.eval_data);
  MIXLAB_CHECK(spec.length == d->T, "task file: length must be the data's T = {} ('{}'), got {}", d->T, spec.data,
               spec.length);
  MIXLAB_CHECK(spec.vocab > d->max_id,
               "task file: vocab {} does not cover the data: {} holds the token id {}; expected ids in [0, {}) "
               "(leave 'vocab' unset to use max + 1 = {})",
               spec.vocab, d->max_where, d->max_id, spec.vocab, d->max_id + 1);
}

std::vector<int64_t> file_task_epoch_order(int64_t rows, uint64_t seed, int64_t epoch) {
  MIXLAB_CHECK(rows >= 1 && epoch >= 0, "file_task_epoch_order: rows must be >= 1 and epoch >= 0, got {} and {}", rows,
               epoch);
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), int64_t{0});
  TaskRng rng(task_seed_mix(seed, kEpochStream, static_cast<uint64_t>(epoch)));
  rng.shuffle(order);
  return order;
}

Batch file_task_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, uint64_t seed) {
  MIXLAB_CHECK(batch_size >= 1 && step >= 0, "task file: batch_size must be >= 1 and step >= 0, got {} and {}",
               batch_size, step);
  const auto d = file_task_data(spec.data, spec.eval_data);
  const int64_t N = d->train_inputs.size(0);
  // The last epoch's order, per thread: consecutive steps reuse it (O(N) once per epoch).
  struct Cached {
    int64_t rows = -1, epoch = -1;
    uint64_t seed = 0;
    std::vector<int64_t> order;
  };
  thread_local Cached cached;
  auto rows = torch::empty({batch_size}, torch::kInt64);
  int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_size; ++b) {
    // In 128 bits: step * batch_size may exceed int64 for absurd (but valid) keys.
    const __int128 g = static_cast<__int128>(step) * batch_size + b;
    const auto epoch = static_cast<int64_t>(g / N), pos = static_cast<int64_t>(g % N);
    if (cached.rows != N || cached.seed != seed || cached.epoch != epoch) {
      cached.order = file_task_epoch_order(N, seed, epoch);
      cached.rows = N, cached.seed = seed, cached.epoch = epoch;
    }
    r[b] = cached.order[static_cast<size_t>(pos)];
  }
  return make_batch(d->train_inputs.index_select(0, rows), d->train_labels.index_select(0, rows));
}

int64_t file_task_eval_batch_count(const TaskSpec& spec, int64_t batch_size) {
  MIXLAB_CHECK(batch_size >= 1, "task file: eval batch size must be >= 1, got {}", batch_size);
  const int64_t E = file_task_data(spec.data, spec.eval_data)->eval_inputs.size(0);
  return (E + batch_size - 1) / batch_size;
}

Batch file_task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index) {
  const int64_t count = file_task_eval_batch_count(spec, batch_size);
  const auto d = file_task_data(spec.data, spec.eval_data);
  const int64_t E = d->eval_inputs.size(0);
  MIXLAB_CHECK(index >= 0 && index < count,
               "task file: eval batch index must be in [0, {}) ({} held-out rows in batches of {}), got {}", count, E,
               batch_size, index);
  const int64_t begin = index * batch_size, n = std::min(batch_size, E - begin);
  return make_batch(d->eval_inputs.narrow(0, begin, n), d->eval_labels.narrow(0, begin, n));
}

}  // namespace mixlab
