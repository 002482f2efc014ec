// The MAD tasks: recall, noisy recall, fuzzy recall, memorization, compression. Definitions and
// the differences from MAD's reference generators are in mixlab/train/task_mad.h.
#include "mixlab/train/task_mad.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "mixlab/core/error.h"
#include "mixlab/train/task_rng.h"
#include "mixlab/train/task_rows.h"

namespace mixlab {
namespace {

bool is_recall(const std::string& n) { return n == "mad_recall" || n == "mad_noisy_recall"; }

// Content tokens that keys and values share: all of [4, V), minus the noise tokens.
int64_t kv_tokens(const TaskSpec& spec) {
  return spec.vocab - kFirstContentToken - (spec.name == "mad_noisy_recall" ? spec.noise_vocab : 0);
}
int64_t key_count(const TaskSpec& spec) { return kv_tokens(spec) / 2; }
int64_t value_count(const TaskSpec& spec) { return kv_tokens(spec) - key_count(spec); }
int64_t first_value(const TaskSpec& spec) { return kFirstContentToken + key_count(spec); }

// n distinct tokens of [first, first + count), in draw order (uniform over the ordered n-tuples:
// MAD's permutations of the key / value tokens).
std::vector<int64_t> distinct_tuple(int64_t first, int64_t count, int64_t n, TaskRng& rng) {
  std::vector<int64_t> pool(count);
  std::iota(pool.begin(), pool.end(), first);
  for (int64_t i = 0; i < n; ++i) std::swap(pool[i], pool[i + rng.below(count - i)]);
  pool.resize(n);
  return pool;
}

// mad_recall / mad_noisy_recall: one row of S tokens, inputs are the first S - 1.
void fill_recall_row(TaskRows& r, int64_t b, const TaskSpec& spec, TaskRng& rng) {
  const int64_t S = spec.length, slots = S / 2, K = key_count(spec), first_v = first_value(spec);
  const bool noisy = spec.name == "mad_noisy_recall" && spec.noise_frac > 0;
  const int64_t first_noise = kFirstContentToken + kv_tokens(spec);
  const int64_t kept = noisy ? rng.below(slots - 1) : -1;  // a slot that is always a pair
  std::vector<int64_t> seq;                                // S tokens
  std::vector<uint8_t> repeat;                             // per token: a key shown before (its position is scored)
  std::map<int64_t, int64_t> value_of;
  seq.reserve(S);
  for (int64_t i = 0; i + 1 < slots; ++i) {
    if (noisy && i != kept && rng.unit() < spec.noise_frac) {
      for (int j = 0; j < 2; ++j) {
        seq.push_back(first_noise + rng.below(spec.noise_vocab));
        repeat.push_back(0);
      }
      continue;
    }
    const int64_t k = kFirstContentToken + rng.below(K);
    const auto it = value_of.find(k);
    const bool seen = it != value_of.end();
    const int64_t v = seen ? it->second : first_v + rng.below(value_count(spec));
    value_of[k] = v;
    seq.push_back(k);
    repeat.push_back(seen ? 1 : 0);
    seq.push_back(v);
    repeat.push_back(0);
  }
  // The probe: a key already shown (uniform over the distinct keys shown), and its value.
  std::vector<int64_t> shown;
  for (const auto& kv : value_of) shown.push_back(kv.first);
  const int64_t k = shown[rng.below(static_cast<int64_t>(shown.size()))];
  seq.push_back(k);
  repeat.push_back(1);
  seq.push_back(value_of[k]);
  repeat.push_back(0);

  int64_t* tok = r.tokens_row(b);
  int64_t* tgt = r.targets_row(b);
  int64_t answer = 0;
  for (int64_t t = 0; t < r.T; ++t) {
    tok[t] = seq[t];
    tgt[t] = seq[t + 1];
    if (repeat[t]) r.score(b, t, seq[t + 1], answer++);
  }
}

// mad_fuzzy_recall: pairs of multi-token keys and values, the rest kPad at the start.
void fill_fuzzy_row(TaskRows& r, int64_t b, const TaskSpec& spec, bool eval, TaskRng& rng) {
  const int64_t S = spec.length, kk = spec.key_len, vv = spec.value_len;
  const int64_t K = key_count(spec), first_v = first_value(spec), V = value_count(spec);
  auto key_size = [&] { return eval ? kk : 1 + rng.below(kk); };
  auto value_size = [&] { return 1 + rng.below(vv); };
  using Tuple = std::vector<int64_t>;
  const Tuple probe_k = distinct_tuple(kFirstContentToken, K, key_size(), rng);
  const Tuple probe_v = distinct_tuple(first_v, V, value_size(), rng);
  const int64_t probe = static_cast<int64_t>(probe_k.size() + probe_v.size());
  const int64_t bound = S - probe - (kk + vv);  // the context ends once it reaches this length
  const int64_t probe_at = rng.below(bound - (kk + vv) + 1);

  std::vector<int64_t> seq;
  std::vector<int64_t> label_answer;  // per token: answer index when this value token is scored, else -1
  std::map<Tuple, Tuple> value_of;
  int64_t answers = 0;
  auto add_pair = [&](const Tuple& k, const Tuple& v, bool scored) {
    for (int64_t t : k) seq.push_back(t), label_answer.push_back(-1);
    for (int64_t t : v) seq.push_back(t), label_answer.push_back(scored ? answers : -1);
    if (scored) ++answers;
    value_of[k] = v;
  };
  bool probe_added = false;
  while (static_cast<int64_t>(seq.size()) < bound) {
    const int64_t ks = key_size(), vs = value_size();
    if (!probe_added && static_cast<int64_t>(seq.size()) >= probe_at) {
      add_pair(probe_k, probe_v, value_of.count(probe_k) > 0);
      probe_added = true;
      continue;
    }
    const Tuple k = distinct_tuple(kFirstContentToken, K, ks, rng);
    const auto it = value_of.find(k);
    const bool seen = it != value_of.end();
    Tuple v;
    if (k == probe_k) {
      v = probe_v;
      probe_added = true;
    } else {
      v = seen ? it->second : distinct_tuple(first_v, V, vs, rng);
    }
    add_pair(k, v, seen);
  }
  MIXLAB_ASSERT(probe_added, "mad_fuzzy_recall: the context ended before the probe");
  add_pair(probe_k, probe_v, true);
  // Left-pad to S + 1 tokens; inputs are the first S, position t predicts token t + 1.
  const int64_t pad = S + 1 - static_cast<int64_t>(seq.size());
  MIXLAB_ASSERT(pad >= 1, "mad_fuzzy_recall: built {} tokens for length {}", seq.size(), S);
  seq.insert(seq.begin(), pad, kTokenPad);
  label_answer.insert(label_answer.begin(), pad, -1);
  int64_t* tok = r.tokens_row(b);
  int64_t* tgt = r.targets_row(b);
  for (int64_t t = 0; t < r.T; ++t) {
    tok[t] = seq[t];
    tgt[t] = seq[t + 1];
    if (label_answer[t + 1] >= 0) r.score(b, t, seq[t + 1], label_answer[t + 1]);
  }
}

void fill_memorization_row(TaskRows& r, int64_t b, const std::vector<int64_t>& map, TaskRng& rng) {
  int64_t* tok = r.tokens_row(b);
  int64_t* tgt = r.targets_row(b);
  const int64_t keys = static_cast<int64_t>(map.size());
  for (int64_t i = 0; 2 * i + 1 < r.T; ++i) {
    const int64_t k = rng.below(keys);
    tok[2 * i] = kFirstContentToken + k;
    tgt[2 * i] = kTokenSep;
    tok[2 * i + 1] = kTokenSep;
    r.score(b, 2 * i + 1, map[k], i);
  }
}

void fill_compression_row(TaskRows& r, int64_t b, const TaskSpec& spec, TaskRng& rng) {
  const int64_t m = spec.length - 1;
  int64_t* tok = r.tokens_row(b);
  int64_t* tgt = r.targets_row(b);
  for (int64_t i = 0; i < m; ++i) tok[i] = kFirstContentToken + rng.below(spec.vocab - kFirstContentToken);
  tok[m] = kTokenSep;
  for (int64_t i = m + 1; i < 2 * m; ++i) tok[i] = kTokenNoise;
  for (int64_t t = 0; t + 1 < m; ++t) tgt[t] = tok[t + 1];
  tgt[m - 1] = kTokenSep;
  for (int64_t i = 0; i < m; ++i) r.score(b, m + i, tok[i], 0);
}

}  // namespace

bool mad_is_task(const std::string& name) {
  return is_recall(name) || name == "mad_fuzzy_recall" || name == "mad_memorization" || name == "mad_compression";
}

int64_t mad_min_length(const TaskSpec& spec) {
  if (is_recall(spec.name)) return 4;  // one pair slot and the probe
  if (spec.name == "mad_fuzzy_recall") return 3 * (spec.key_len + spec.value_len);
  return 2;  // memorization: one pair; compression: one token
}

void mad_validate(const TaskSpec& spec) {
  const std::string& n = spec.name;
  MIXLAB_CHECK(mad_is_task(n), "mad_validate: '{}' is not a MAD task", n);
  if (n == "mad_fuzzy_recall") {
    MIXLAB_CHECK(spec.key_len >= 1, "task {}: key_len must be >= 1, got {}", n, spec.key_len);
    MIXLAB_CHECK(spec.value_len >= 1, "task {}: value_len must be >= 1, got {}", n, spec.value_len);
  }
  if (n == "mad_noisy_recall") {
    MIXLAB_CHECK(spec.noise_frac >= 0 && spec.noise_frac < 1, "task {}: noise_frac must be in [0, 1), got {}", n,
                 spec.noise_frac);
    MIXLAB_CHECK(spec.noise_vocab >= 1, "task {}: noise_vocab must be >= 1, got {}", n, spec.noise_vocab);
  }
  MIXLAB_CHECK(spec.length >= mad_min_length(spec), "task {}: length must be >= {}{}, got {}", n, mad_min_length(spec),
               n == "mad_fuzzy_recall" ? " (3 x (key_len + value_len): a probe pair, a context and room for it)" : "",
               spec.length);
  MIXLAB_CHECK(n == "mad_compression" || n == "mad_fuzzy_recall" || spec.length % 2 == 0,
               "task {}: length must be even (pairs of 2 tokens), got {}", n, spec.length);
  if (n == "mad_compression") {
    MIXLAB_CHECK(spec.vocab >= kFirstContentToken + 1,
                 "task {}: vocab must be >= {} (4 special tokens + content), got {}", n, kFirstContentToken + 1,
                 spec.vocab);
    return;
  }
  // Keys and values: at least one each (fuzzy: enough distinct tokens for the longest key / value).
  const int64_t need_k = n == "mad_fuzzy_recall" ? spec.key_len : 1;
  const int64_t need_v = n == "mad_fuzzy_recall" ? spec.value_len : 1;
  const int64_t noise = n == "mad_noisy_recall" ? spec.noise_vocab : 0;
  // keys = floor(C / 2) >= need_k and values = ceil(C / 2) >= need_v for C content tokens.
  const int64_t need = kFirstContentToken + noise + std::max(2 * need_k, 2 * need_v - 1);
  MIXLAB_CHECK(key_count(spec) >= need_k && value_count(spec) >= need_v,
               "task {}: vocab {} is too small: 4 special tokens{}, then keys and values split the rest in halves "
               "({} keys, {} values), and the task needs {} key and {} value tokens, so vocab must be >= {}",
               n, spec.vocab, noise ? fmt::format(", {} noise tokens", noise) : std::string(), key_count(spec),
               value_count(spec), need_k, need_v, need);
}

int64_t mad_sequence_length(const TaskSpec& spec, int64_t length) {
  if (is_recall(spec.name)) return length - 1;
  if (spec.name == "mad_compression") return 2 * (length - 1);
  return length;
}

std::vector<int64_t> mad_memorization_map(const TaskSpec& spec) {
  TaskRng rng(task_seed_mix(spec.map_seed, 21, 0));
  // MAD: shuffle the keys and the values, pair them in order. Keys in order here (a shuffled
  // key order paired with shuffled values is the same uniform one-to-one map).
  return distinct_tuple(first_value(spec), value_count(spec), key_count(spec), rng);
}

Batch mad_generate(const TaskSpec& spec, int64_t batch_size, uint64_t seed, bool eval) {
  mad_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task {}: batch_size must be >= 1, got {}", spec.name, batch_size);
  TaskRows rows(batch_size, mad_sequence_length(spec, spec.length));
  const std::vector<int64_t> map =
      spec.name == "mad_memorization" ? mad_memorization_map(spec) : std::vector<int64_t>{};
  for (int64_t b = 0; b < batch_size; ++b) {
    TaskRng rng(task_seed_mix(seed, 20, static_cast<uint64_t>(b)));
    if (is_recall(spec.name)) {
      fill_recall_row(rows, b, spec, rng);
    } else if (spec.name == "mad_fuzzy_recall") {
      fill_fuzzy_row(rows, b, spec, eval, rng);
    } else if (spec.name == "mad_memorization") {
      fill_memorization_row(rows, b, map, rng);
    } else {
      fill_compression_row(rows, b, spec, rng);
    }
  }
  return rows.to_batch(spec.length);
}

}  // namespace mixlab
