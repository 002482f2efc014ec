// Synthetic tasks: copy, associative recall, multi-hop recall. Layout documented in tasks.h.
#include "mixlab/train/tasks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "mixlab/core/error.h"
#include "mixlab/data/textcopy.h"
#include "mixlab/train/mqar.h"
#include "mixlab/train/task_file.h"
#include "mixlab/train/task_induction.h"
#include "mixlab/train/task_lm.h"
#include "mixlab/train/task_mad.h"
#include "mixlab/train/task_rng.h"
#include "mixlab/train/task_s5.h"
#include "mixlab/train/task_selective_copy.h"

namespace mixlab {
namespace {

constexpr int64_t kMinCopyLength = 1;
constexpr int64_t kMinRecallLength = 5;  // kBegin k v kSep q (mqar.h)

bool is_recall_like(const std::string& name) { return name == "recall" || name == "multihop"; }
// The MAD suite and the two classics: one length, no curriculum, own generators.
bool is_mad_like(const std::string& name) {
  return mad_is_task(name) || name == "selective_copy" || name == "induction";
}
int64_t min_length(const TaskSpec& spec) {
  if (mad_is_task(spec.name)) return mad_min_length(spec);
  if (spec.name == "selective_copy") return 2 * spec.copy_tokens + 2;
  if (spec.name == "induction") return 3;
  if (spec.name == "textcopy") return 2;
  return spec.name == "copy" ? kMinCopyLength : kMinRecallLength;
}
int64_t ceil_half(int64_t x) { return (x + 1) / 2; }

struct Rows {
  int64_t B, T;
  std::vector<int64_t> tokens, targets, mask, answer, hops;
  Rows(int64_t b, int64_t t)
      : B(b),
        T(t),
        tokens(b * t, kTokenPad),
        targets(b * t, kTokenPad),
        mask(b * t, 0),
        answer(b * t, -1),
        hops(b * t, -1) {}
};

void fill_copy_row(Rows& r, int64_t b, int64_t n, int64_t vocab, TaskRng& rng) {
  int64_t* tok = &r.tokens[b * r.T];
  int64_t* tgt = &r.targets[b * r.T];
  tok[0] = kTokenBegin;
  for (int64_t i = 0; i < n; ++i) tok[1 + i] = kFirstContentToken + rng.below(vocab - kFirstContentToken);
  tok[n + 1] = kTokenSep;
  for (int64_t i = 0; i + 1 < n; ++i) tok[n + 2 + i] = tok[1 + i];
  for (int64_t t = 0; t + 1 < r.T; ++t) tgt[t] = tok[t + 1];
  tgt[r.T - 1] = tok[n];  // x_n: the target of the last column, never an input
  for (int64_t t = n + 1; t <= 2 * n; ++t) {
    r.mask[b * r.T + t] = 1;
    r.answer[b * r.T + t] = 0;
  }
}

// recall and multihop: one MQAR row (mqar.h); multihop adds links with probability hop_prob.
void fill_recall_row(Rows& r, int64_t b, const TaskSpec& spec, int64_t S, int64_t n, TaskRng& rng) {
  const MqarRow row = mqar_row(spec.vocab, S, n, spec.name == "multihop" ? spec.hop_prob : 0.0, rng);
  const int64_t o = b * r.T;
  std::copy(row.tokens.begin(), row.tokens.end(), r.tokens.begin() + o);
  std::copy(row.targets.begin(), row.targets.end(), r.targets.begin() + o);
  std::copy(row.scored.begin(), row.scored.end(), r.mask.begin() + o);
  std::copy(row.answer.begin(), row.answer.end(), r.answer.begin() + o);
  std::copy(row.hops.begin(), row.hops.end(), r.hops.begin() + o);
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"copy",
                                                 "recall",
                                                 "multihop",
                                                 "textcopy",
                                                 "s5",
                                                 "lm",
                                                 "file",
                                                 "mad_recall",
                                                 "mad_fuzzy_recall",
                                                 "mad_noisy_recall",
                                                 "selective_copy",
                                                 "mad_compression",
                                                 "mad_memorization",
                                                 "induction"};
  return names;
}

const Corpus& task_text_corpus() {
  // Loaded once per process; the search order is documented in tasks.h.
  static const Corpus corpus = [] {
    std::vector<std::string> tried;
    if (const char* env = std::getenv("MIXLAB_DATA_DIR"); env && *env) return Corpus::load_brown(env);
    for (const char* dir : {"data/brown", "data/sample"}) {
      std::error_code ec;
      if (std::filesystem::is_directory(dir, ec)) return Corpus::load_brown(dir);
      tried.push_back(dir);
    }
    MIXLAB_FAIL(
        "tasks textcopy/lm: no corpus found (set MIXLAB_DATA_DIR, or run from the repository root where "
        "data/brown (scripts/setup.sh) or data/sample exists); tried {}",
        fmt::join(tried, ", "));
    return Corpus::from_documents({});
  }();
  return corpus;
}

uint64_t task_seed_mix(uint64_t seed, uint64_t stream, uint64_t index) {
  TaskRng a(seed ^ 0x6A09E667F3BCC909ull);
  uint64_t h = a.next();
  TaskRng b(h ^ (stream * 0xD1B54A32D192ED03ull));
  h = b.next();
  TaskRng c(h ^ (index * 0x9E3779B97F4A7C15ull + 0x243F6A8885A308D3ull));
  return c.next();
}

void task_validate(const TaskSpec& spec) {
  const auto& names = task_names();
  MIXLAB_CHECK(std::find(names.begin(), names.end(), spec.name) != names.end(), "task: unknown task '{}' (known: {})",
               spec.name, fmt::join(names, ", "));
  MIXLAB_CHECK(spec.curriculum_phases >= 1 && spec.curriculum_phases <= kMaxCurriculumPhases,
               "task {}: curriculum_phases must be in [1, {}], got {}", spec.name, kMaxCurriculumPhases,
               spec.curriculum_phases);
  // min_length shapes the training lengths of the tasks whose rows task_train_batch draws below.
  const bool drawn_lengths = is_recall_like(spec.name) || spec.name == "copy" || spec.name == "textcopy";
  MIXLAB_CHECK(spec.min_length == 0 || drawn_lengths,
               "task {}: min_length applies to copy, recall, multihop and textcopy only, got {}", spec.name,
               spec.min_length);
  if (spec.name == "s5") return s5_validate(spec);           // mixlab/train/task_s5.h
  if (spec.name == "lm") return lm_validate(spec);           // mixlab/train/task_lm.h
  if (spec.name == "file") return file_task_validate(spec);  // mixlab/train/task_file.h
  if (mad_is_task(spec.name)) return mad_validate(spec);     // mixlab/train/task_mad.h
  if (spec.name == "selective_copy") return selective_copy_validate(spec);
  if (spec.name == "induction") return induction_validate(spec);
  MIXLAB_CHECK(spec.vocab >= 8, "task {}: vocab must be >= 8 (4 special tokens + content), got {}", spec.name,
               spec.vocab);
  MIXLAB_CHECK(spec.name != "textcopy" || spec.vocab >= Corpus::kVocabSize,
               "task textcopy: vocab must be >= {} (byte tokens), got {}", Corpus::kVocabSize, spec.vocab);
  MIXLAB_CHECK(spec.length >= min_length(spec), "task {}: length must be >= {}, got {}", spec.name, min_length(spec),
               spec.length);
  MIXLAB_CHECK(spec.min_length == 0 || (spec.min_length >= min_length(spec) && spec.min_length <= spec.length),
               "task {}: min_length must be 0 (half the length) or in [{}, length = {}], got {}", spec.name,
               min_length(spec), spec.length, spec.min_length);
  if (is_recall_like(spec.name)) {
    const std::string what = "task " + spec.name;
    mqar_validate(what.c_str(), spec.vocab, spec.length, spec.pairs, spec.hop_prob);
  }
}

int64_t task_sequence_length(const TaskSpec& spec, int64_t length) {
  if (mad_is_task(spec.name)) return mad_sequence_length(spec, length);
  if (spec.name == "selective_copy") return length;
  if (spec.name == "induction") return length + 1;
  if (spec.name == "lm") return length;
  if (spec.name == "textcopy") return 2 * length - 1;
  return spec.name == "copy" ? 2 * length + 1 : length;
}

namespace {

// textcopy rows come from mixlab/data/textcopy.h; one answer per row (the second copy).
Batch text_copy_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, uint64_t seed, Split split) {
  auto tb = textcopy_batch(task_text_corpus(), batch_size, length, seed, split);
  Batch out;
  out.tokens = tb.inputs;
  out.targets = tb.targets;
  out.mask = tb.mask;
  out.answer = torch::where(tb.mask > 0, torch::zeros_like(tb.inputs), torch::full_like(tb.inputs, -1));
  out.hops = torch::full_like(tb.inputs, -1);
  out.length = length;
  return out;
}

// The MAD suite, selective copying and induction at `length` (<= spec.length); `eval` picks
// held-out rows where the task's held-out rows differ (mad_fuzzy_recall).
Batch mad_like_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, uint64_t seed, bool eval) {
  TaskSpec at = spec;
  at.length = length;
  if (spec.name == "selective_copy") return selective_copy_generate(at, batch_size, seed);
  if (spec.name == "induction") return induction_generate(at, batch_size, length, seed);
  return mad_generate(at, batch_size, seed, eval);
}

}  // namespace

Batch task_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, int64_t pairs, uint64_t seed) {
  if (spec.name == "s5") return s5_generate(spec, batch_size, length, seed);
  if (spec.name == "lm") return lm_batch(spec, batch_size, 0, seed);
  MIXLAB_CHECK(spec.name != "file", "task_generate: task file has no generator (its rows come from '{}')", spec.data);
  task_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task_generate: batch_size must be >= 1, got {}", batch_size);
  MIXLAB_CHECK(length >= min_length(spec) && length <= spec.length,
               "task_generate: length must be in [{}, {}] for task {}, got {}", min_length(spec), spec.length,
               spec.name, length);
  if (spec.name == "textcopy") return text_copy_generate(spec, batch_size, length, seed, Split::kTrain);
  if (is_mad_like(spec.name)) return mad_like_generate(spec, batch_size, length, seed, false);
  const bool recall = is_recall_like(spec.name);
  if (recall) {
    const int64_t most = std::min(mqar_max_pairs(length), mqar_key_count(spec.vocab));
    MIXLAB_CHECK(pairs >= 1 && pairs <= most,
                 "task_generate: pairs must be in [1, {}] at length {} for task {}, got {}", most, length, spec.name,
                 pairs);
  }
  const int64_t T = task_sequence_length(spec, length);
  Rows rows(batch_size, T);
  for (int64_t b = 0; b < batch_size; ++b) {
    TaskRng rng(task_seed_mix(seed, 7, static_cast<uint64_t>(b)));
    if (recall) {
      fill_recall_row(rows, b, spec, length, pairs, rng);
    } else {
      fill_copy_row(rows, b, length, spec.vocab, rng);
    }
  }
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto tensor = [&](std::vector<int64_t>& v) { return torch::from_blob(v.data(), {batch_size, T}, i64).clone(); };
  Batch out;
  out.tokens = tensor(rows.tokens);
  out.targets = tensor(rows.targets);
  out.mask = tensor(rows.mask).to(torch::kFloat32);
  out.answer = tensor(rows.answer);
  out.hops = tensor(rows.hops);
  out.length = length;
  out.pairs = recall ? pairs : 0;
  return out;
}

int64_t task_eval_batch_count(const TaskSpec& spec, int64_t batch_size, int64_t eval_batches) {
  return spec.name == "file" ? file_task_eval_batch_count(spec, batch_size) : eval_batches;
}

int task_phase_count(const TaskSpec& spec) { return spec.curriculum ? static_cast<int>(spec.curriculum_phases) : 1; }

int task_phase(const TaskSpec& spec, int64_t step, int64_t total_steps) {
  const int64_t phases = task_phase_count(spec);
  if (total_steps <= 0) return static_cast<int>(phases - 1);
  return static_cast<int>(std::min<int64_t>(phases - 1, std::max<int64_t>(0, step) * phases / total_steps));
}

int64_t task_shortest_train_length(const TaskSpec& spec, int64_t phase_length) {
  const int64_t shortest = spec.min_length > 0 ? std::min(spec.min_length, phase_length) : ceil_half(phase_length);
  return std::max(min_length(spec), shortest);
}

Batch task_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, int64_t total_steps, uint64_t seed) {
  if (spec.name == "s5") return s5_train_batch(spec, batch_size, step, total_steps, seed);
  if (spec.name == "lm") return lm_batch(spec, batch_size, step, seed);
  if (spec.name == "file") return file_task_train_batch(spec, batch_size, step, seed);
  task_validate(spec);
  if (is_mad_like(spec.name))  // one length, no curriculum
    return mad_like_generate(spec, batch_size, spec.length, task_seed_mix(seed, 2, static_cast<uint64_t>(step)), false);
  const int64_t div = int64_t{1} << (task_phase_count(spec) - 1 - task_phase(spec, step, total_steps));
  TaskRng rng(task_seed_mix(seed, 1, static_cast<uint64_t>(step)));
  const int64_t L = std::max(min_length(spec), spec.length / div);
  const int64_t length = rng.between(task_shortest_train_length(spec, L), L);
  int64_t pairs = 0;
  if (is_recall_like(spec.name)) {
    const int64_t P = std::max<int64_t>(1, spec.pairs / div);
    pairs = std::min(rng.between(ceil_half(P), P), mqar_max_pairs(length));
  }
  return task_generate(spec, batch_size, length, pairs, task_seed_mix(seed, 2, static_cast<uint64_t>(step)));
}

const char* eval_split_name(EvalSplit split) { return split == EvalSplit::kValid ? "valid" : "test"; }

EvalSplit task_report_split(const TaskSpec& spec) { return spec.name == "lm" ? EvalSplit::kValid : EvalSplit::kTest; }

Batch task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index, uint64_t seed) {
  return task_eval_batch(spec, batch_size, index, seed, task_report_split(spec));
}

Batch task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index, uint64_t seed, EvalSplit split) {
  if (spec.name == "lm")
    return lm_batch(spec, batch_size, index, task_seed_mix(seed, 3, 0),
                    split == EvalSplit::kValid ? LmSplit::kValid : LmSplit::kTest);
  if (spec.name == "file") {
    MIXLAB_CHECK(split == EvalSplit::kTest,
                 "task file has one held-out set (eval_data, else the last rows of data), no separate validation "
                 "split: a learning-rate sweep or stop_at cannot choose on rows apart from the reported ones");
    return file_task_eval_batch(spec, batch_size, index);  // held-out rows in order
  }
  // Stream 3 is the test split every run has always reported; stream 4 the validation split.
  const uint64_t stream = split == EvalSplit::kTest ? 3 : 4;
  if (spec.name == "textcopy") {  // held-out documents, not only held-out draws
    task_validate(spec);
    return text_copy_generate(spec, batch_size, spec.length, task_seed_mix(seed, stream, static_cast<uint64_t>(index)),
                              Split::kValidation);
  }
  if (is_mad_like(spec.name)) {
    task_validate(spec);
    return mad_like_generate(spec, batch_size, spec.length, task_seed_mix(seed, stream, static_cast<uint64_t>(index)),
                             true);
  }
  return task_generate(spec, batch_size, spec.length, is_recall_like(spec.name) ? spec.pairs : 0,
                       task_seed_mix(seed, stream, static_cast<uint64_t>(index)));
}

}  // namespace mixlab
