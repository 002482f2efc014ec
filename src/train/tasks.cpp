// Synthetic tasks: copy, associative recall, multi-hop recall. Layout documented in tasks.h.
#include "mixlab/train/tasks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "mixlab/core/error.h"
#include "mixlab/data/textcopy.h"
#include "mixlab/train/task_s5.h"

namespace mixlab {
namespace {

constexpr int64_t kMinCopyLength = 1;
constexpr int64_t kMinRecallLength = 6;  // kBegin k v kSep k v

// splitmix64: small, fast, and identical on every platform (std:: distributions are not).
struct TaskRng {
  uint64_t s;
  explicit TaskRng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (rejection).
  int64_t below(int64_t n) {
    const uint64_t un = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % un;
    uint64_t r;
    do {
      r = next();
    } while (r >= limit);
    return static_cast<int64_t>(r % un);
  }
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  template <class T>
  void shuffle(std::vector<T>& v) {  // Fisher–Yates
    for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[below(i + 1)]);
  }
};

bool is_recall_like(const std::string& name) { return name == "recall" || name == "multihop"; }
int64_t min_length(const TaskSpec& spec) {
  if (spec.name == "textcopy") return 2;
  return spec.name == "copy" ? kMinCopyLength : kMinRecallLength;
}
int64_t key_count(const TaskSpec& spec) { return (spec.vocab - kFirstContentToken) / 2; }
int64_t ceil_half(int64_t x) { return (x + 1) / 2; }
// Most pairs a recall sequence of length S can hold with at least one query.
int64_t max_pairs_for(int64_t S) { return (S - 4) / 2; }

struct Rows {
  int64_t B, T;
  std::vector<int64_t> tokens, mask, answer;
  std::vector<int64_t> label;  // >= 0: the target of that position instead of the next token
  std::vector<int64_t> hops;   // links behind a query's answer, -1 outside queries
  Rows(int64_t b, int64_t t)
      : B(b), T(t), tokens(b * t, kTokenPad), mask(b * t, 0), answer(b * t, -1), label(b * t, -1), hops(b * t, -1) {}
};

void fill_copy_row(Rows& r, int64_t b, int64_t n, int64_t vocab, TaskRng& rng) {
  int64_t* tok = &r.tokens[b * r.T];
  tok[0] = kTokenBegin;
  for (int64_t i = 0; i < n; ++i) tok[1 + i] = kFirstContentToken + rng.below(vocab - kFirstContentToken);
  tok[n + 1] = kTokenSep;
  for (int64_t i = 0; i + 1 < n; ++i) tok[n + 2 + i] = tok[1 + i];
  for (int64_t t = n + 1; t <= 2 * n; ++t) {
    r.mask[b * r.T + t] = 1;
    r.answer[b * r.T + t] = 0;
  }
}

// Also returns (through `last_target`) the token that follows the final position, which is not
// an input but is the target of the last column when a query ends exactly at S.
void fill_recall_row(Rows& r, int64_t b, const TaskSpec& spec, int64_t S, int64_t n, TaskRng& rng,
                     int64_t& last_target) {
  const int64_t K = key_count(spec);
  const int64_t first_value = kFirstContentToken + K;
  const int64_t n_values = spec.vocab - first_value;
  const bool multihop = spec.name == "multihop";

  // Distinct keys: partial Fisher–Yates over the key range.
  std::vector<int64_t> keys(K);
  std::iota(keys.begin(), keys.end(), kFirstContentToken);
  for (int64_t i = 0; i < n; ++i) std::swap(keys[i], keys[i + rng.below(K - i)]);
  keys.resize(n);
  // vals[i] is a value token, or (multihop) the key of an earlier pair; link[i] = that pair.
  std::vector<int64_t> vals(n), link(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    vals[i] = first_value + rng.below(n_values);
    if (multihop && i > 0 && rng.unit() < spec.hop_prob) {
      link[i] = rng.below(i);
      vals[i] = keys[link[i]];
    }
  }

  // resolved[i]: the value pair i's key finally stands for (links point to earlier pairs, so one
  // pass in context order resolves every chain).
  std::vector<int64_t> resolved(n), depth(n);  // depth[i]: links from pair i to a real value
  for (int64_t i = 0; i < n; ++i) {
    resolved[i] = link[i] < 0 ? vals[i] : resolved[link[i]];
    depth[i] = link[i] < 0 ? 0 : depth[link[i]] + 1;
  }

  // Context: n pair-units and g filler-units in random order.
  const int64_t g = std::max<int64_t>(0, S - 2 - 4 * n);
  std::vector<int> units(n + g, 0);
  std::fill(units.begin(), units.begin() + n, 1);
  rng.shuffle(units);

  std::vector<int64_t> seq;
  seq.reserve(S + 1);
  seq.push_back(kTokenBegin);
  int64_t next_pair = 0;
  std::vector<std::pair<int64_t, int64_t>> link_labels;  // (position of a link key, its resolved value)
  for (int u : units) {
    if (u) {
      seq.push_back(keys[next_pair]);
      if (link[next_pair] >= 0) link_labels.emplace_back(static_cast<int64_t>(seq.size()), resolved[next_pair]);
      seq.push_back(vals[next_pair]);
      ++next_pair;
    } else {
      seq.push_back(kTokenNoise);
    }
  }
  seq.push_back(kTokenSep);

  // Queries: the keys in random order, each followed by its resolved value (for recall the
  // stored value; for multihop the end of the link chain).
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  int64_t* tok = &r.tokens[b * r.T];
  int64_t* label = &r.label[b * r.T];
  int64_t answer_index = 0;
  std::vector<int64_t> scored;  // positions in seq whose target is a query's answer
  std::vector<int64_t> scored_depth;
  for (int64_t q : order) {
    // A query occupies 2 tokens, but its answer is only a target: it must fit within S + 1
    // (the token after position S-1 is the last column's target).
    if (static_cast<int64_t>(seq.size()) + 2 > S + 1) break;
    scored.push_back(static_cast<int64_t>(seq.size()));
    scored_depth.push_back(depth[q]);
    seq.push_back(keys[q]);
    seq.push_back(resolved[q]);
    ++answer_index;
  }
  MIXLAB_ASSERT(answer_index > 0, "recall row without a query (S={}, n={})", S, n);
  last_target = static_cast<int64_t>(seq.size()) > S ? seq[S] : kTokenPad;
  for (int64_t t = 0; t < S && t < static_cast<int64_t>(seq.size()); ++t) tok[t] = seq[t];
  for (size_t i = 0; i < scored.size(); ++i) {
    r.mask[b * r.T + scored[i]] = 1;
    r.answer[b * r.T + scored[i]] = static_cast<int64_t>(i);
    r.hops[b * r.T + scored[i]] = scored_depth[i];
  }
  // Multihop labels (App. C.1): the context position holding a link key is scored with the
  // value that link resolves to. Its target is not the next token, so it is stored as a label
  // that replaces the next-token target; it belongs to no answer (answer = -1).
  for (const auto& [pos, value] : link_labels) {
    r.mask[b * r.T + pos] = 1;
    label[pos] = value;
  }
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"copy", "recall", "multihop", "textcopy", "s5"};
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
    MIXLAB_CHECK(false,
                 "task textcopy: no corpus found (set MIXLAB_DATA_DIR, or run from the repository root where "
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
  if (spec.name == "s5") return s5_validate(spec);  // mixlab/train/task_s5.h
  MIXLAB_CHECK(spec.vocab >= 8, "task {}: vocab must be >= 8 (4 special tokens + content), got {}", spec.name,
               spec.vocab);
  MIXLAB_CHECK(spec.name != "textcopy" || spec.vocab >= Corpus::kVocabSize,
               "task textcopy: vocab must be >= {} (byte tokens), got {}", Corpus::kVocabSize, spec.vocab);
  MIXLAB_CHECK(spec.length >= min_length(spec), "task {}: length must be >= {}, got {}", spec.name, min_length(spec),
               spec.length);
  if (is_recall_like(spec.name)) {
    MIXLAB_CHECK(spec.pairs >= 1, "task {}: pairs must be >= 1, got {}", spec.name, spec.pairs);
    MIXLAB_CHECK(spec.pairs <= key_count(spec),
                 "task {}: pairs ({}) must be <= the number of key tokens (vocab - 4) / 2 = {}; raise vocab", spec.name,
                 spec.pairs, key_count(spec));
    MIXLAB_CHECK(spec.pairs <= max_pairs_for(spec.length),
                 "task {}: pairs ({}) must be <= (length - 4) / 2 = {} so that a query fits", spec.name, spec.pairs,
                 max_pairs_for(spec.length));
    MIXLAB_CHECK(spec.hop_prob >= 0.0 && spec.hop_prob <= 1.0, "task {}: hop_prob must be in [0, 1], got {}", spec.name,
                 spec.hop_prob);
  }
}

int64_t task_sequence_length(const TaskSpec& spec, int64_t length) {
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

}  // namespace

Batch task_generate(const TaskSpec& spec, int64_t batch_size, int64_t length, int64_t pairs, uint64_t seed) {
  if (spec.name == "s5") return s5_generate(spec, batch_size, length, seed);
  task_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task_generate: batch_size must be >= 1, got {}", batch_size);
  MIXLAB_CHECK(length >= min_length(spec) && length <= spec.length,
               "task_generate: length must be in [{}, {}] for task {}, got {}", min_length(spec), spec.length,
               spec.name, length);
  if (spec.name == "textcopy") return text_copy_generate(spec, batch_size, length, seed, Split::kTrain);
  const bool recall = is_recall_like(spec.name);
  if (recall) {
    MIXLAB_CHECK(pairs >= 1 && pairs <= max_pairs_for(length) && pairs <= key_count(spec),
                 "task_generate: pairs must be in [1, {}] at length {} for task {}, got {}",
                 std::min(max_pairs_for(length), key_count(spec)), length, spec.name, pairs);
  }
  const int64_t T = task_sequence_length(spec, length);
  Rows rows(batch_size, T);
  std::vector<int64_t> last_targets(batch_size, kTokenPad);
  for (int64_t b = 0; b < batch_size; ++b) {
    TaskRng rng(task_seed_mix(seed, 7, static_cast<uint64_t>(b)));
    if (recall) {
      fill_recall_row(rows, b, spec, length, pairs, rng, last_targets[b]);
    } else {
      fill_copy_row(rows, b, length, spec.vocab, rng);
      // The target of the last column is x_n, the token the row does not hold as an input.
      last_targets[b] = rows.tokens[b * T + 1 + length - 1];
    }
  }
  Batch out;
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  out.tokens = torch::from_blob(rows.tokens.data(), {batch_size, T}, i64).clone();
  out.targets = torch::full({batch_size, T}, kTokenPad, i64);
  if (T > 1) out.targets.narrow(1, 0, T - 1).copy_(out.tokens.narrow(1, 1, T - 1));
  out.targets.select(1, T - 1).copy_(torch::from_blob(last_targets.data(), {batch_size}, i64));
  auto label = torch::from_blob(rows.label.data(), {batch_size, T}, i64);
  out.targets = torch::where(label >= 0, label, out.targets);
  out.mask = torch::from_blob(rows.mask.data(), {batch_size, T}, i64).to(torch::kFloat32);
  out.answer = torch::from_blob(rows.answer.data(), {batch_size, T}, i64).clone();
  out.hops = torch::from_blob(rows.hops.data(), {batch_size, T}, i64).clone();
  out.length = length;
  out.pairs = recall ? pairs : 0;
  return out;
}

int task_phase(const TaskSpec& spec, int64_t step, int64_t total_steps) {
  if (!spec.curriculum || total_steps <= 0) return 3;
  return static_cast<int>(std::min<int64_t>(3, std::max<int64_t>(0, step) * 4 / total_steps));
}

Batch task_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, int64_t total_steps, uint64_t seed) {
  if (spec.name == "s5") return s5_train_batch(spec, batch_size, step, total_steps, seed);
  task_validate(spec);
  static constexpr int64_t kDivisor[4] = {8, 4, 2, 1};
  const int64_t div = kDivisor[task_phase(spec, step, total_steps)];
  TaskRng rng(task_seed_mix(seed, 1, static_cast<uint64_t>(step)));
  const int64_t L = std::max(min_length(spec), spec.length / div);
  const int64_t length = rng.between(std::max(min_length(spec), ceil_half(L)), L);
  int64_t pairs = 0;
  if (is_recall_like(spec.name)) {
    const int64_t P = std::max<int64_t>(1, spec.pairs / div);
    pairs = std::min(rng.between(ceil_half(P), P), max_pairs_for(length));
  }
  return task_generate(spec, batch_size, length, pairs, task_seed_mix(seed, 2, static_cast<uint64_t>(step)));
}

Batch task_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t index, uint64_t seed) {
  if (spec.name == "textcopy") {  // held-out documents, not only held-out draws
    task_validate(spec);
    return text_copy_generate(spec, batch_size, spec.length, task_seed_mix(seed, 3, static_cast<uint64_t>(index)),
                              Split::kValidation);
  }
  return task_generate(spec, batch_size, spec.length, is_recall_like(spec.name) ? spec.pairs : 0,
                       task_seed_mix(seed, 3, static_cast<uint64_t>(index)));
}

}  // namespace mixlab
