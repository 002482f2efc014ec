// The S5 state-tracking task; layout and curriculum documented in mixlab/train/task_s5.h.
#include "mixlab/train/task_s5.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

// Lexicographic rank of the first n entries of p (a permutation of {0..n-1}): the Lehmer code,
// digit i counts the later entries smaller than p[i], weight (n - 1 - i)!.
int64_t rank_of(const S5Perm& p, int n) {
  int64_t rank = 0, weight = 1;
  for (int i = n - 1; i >= 0; --i) {
    int smaller = 0;
    for (int j = i + 1; j < n; ++j) smaller += p[j] < p[i];
    rank += smaller * weight;
    weight *= n - i;
  }
  return rank;
}

// The n! permutations of S_n in lexicographic order and their composition table, built once per n.
struct SnTables {
  std::vector<S5Perm> perms;     // entries [0, n) used
  std::vector<int64_t> compose;  // [a * n! + b] = rank(a · b)
  explicit SnTables(int n) {
    S5Perm p = {0, 1, 2, 3, 4};
    do perms.push_back(p);
    while (std::next_permutation(p.begin(), p.begin() + n));
    const int64_t order = static_cast<int64_t>(perms.size());
    compose.resize(static_cast<size_t>(order * order));
    for (int64_t a = 0; a < order; ++a)
      for (int64_t b = 0; b < order; ++b) {
        S5Perm ab = {0, 1, 2, 3, 4};
        for (int i = 0; i < n; ++i) ab[i] = perms[b][perms[a][i]];  // a first, then b
        compose[a * order + b] = rank_of(ab, n);
      }
  }
};
const SnTables& tables(int64_t n) {
  static const SnTables t2(2), t3(3), t4(4), t5(5);
  const SnTables* all[] = {&t2, &t3, &t4, &t5};
  return *all[n - kSnMinElements];
}

// splitmix64, the generator family of tasks.cpp (platform independent).
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
int64_t below(uint64_t& s, int64_t n) {  // uniform in [0, n) without modulo bias
  const uint64_t un = static_cast<uint64_t>(n), limit = UINT64_MAX - UINT64_MAX % un;
  uint64_t r;
  do r = splitmix(s);
  while (r >= limit);
  return static_cast<int64_t>(r % un);
}

}  // namespace

int64_t sn_order(int64_t n) {
  MIXLAB_CHECK(n >= kSnMinElements && n <= kSnMaxElements, "sn_order: elements must be in [{}, {}], got {}",
               kSnMinElements, kSnMaxElements, n);
  int64_t order = 1;
  for (int64_t k = 2; k <= n; ++k) order *= k;
  return order;
}

S5Perm sn_permutation(int64_t n, int64_t rank) {
  const int64_t order = sn_order(n);
  MIXLAB_CHECK(rank >= 0 && rank < order, "sn_permutation: rank must be in [0, {}), got {}", order, rank);
  return tables(n).perms[static_cast<size_t>(rank)];
}

int64_t sn_compose(int64_t n, int64_t a, int64_t b) {
  const int64_t order = sn_order(n);
  MIXLAB_CHECK(a >= 0 && a < order && b >= 0 && b < order, "sn_compose: ranks must be in [0, {}), got {} and {}", order,
               a, b);
  return tables(n).compose[static_cast<size_t>(a * order + b)];
}

S5Perm s5_permutation(int64_t rank) { return sn_permutation(5, rank); }

int64_t s5_rank(const S5Perm& p) {
  for (int i = 0; i < 5; ++i)
    MIXLAB_CHECK(p[i] >= 0 && p[i] < 5, "s5_rank: entries must be in [0, 5), got {} at {}", p[i], i);
  return rank_of(p, 5);
}

int64_t s5_compose(int64_t a, int64_t b) { return sn_compose(5, a, b); }

int64_t s5_min_vocab(const TaskSpec& spec) { return kFirstContentToken + sn_order(spec.elements); }

void s5_validate(const TaskSpec& spec) {
  MIXLAB_CHECK(spec.elements >= kSnMinElements && spec.elements <= kSnMaxElements,
               "task s5: elements (n of the group S_n) must be in [{}, {}], got {}", kSnMinElements, kSnMaxElements,
               spec.elements);
  MIXLAB_CHECK(spec.vocab >= s5_min_vocab(spec),
               "task s5: vocab must be >= {} (4 special tokens + {} permutations of S{}), got {}", s5_min_vocab(spec),
               sn_order(spec.elements), spec.elements, spec.vocab);
  MIXLAB_CHECK(spec.length >= 1, "task s5: length must be >= 1, got {}", spec.length);
}

Batch s5_generate(const TaskSpec& spec, int64_t batch_size, int64_t n, uint64_t seed) {
  s5_validate(spec);
  MIXLAB_CHECK(batch_size >= 1, "task s5: batch_size must be >= 1, got {}", batch_size);
  MIXLAB_CHECK(n >= 1, "task s5: length must be >= 1, got {}", n);
  std::vector<int64_t> tokens(static_cast<size_t>(batch_size * n)), targets(tokens.size());
  const int64_t order = sn_order(spec.elements);
  for (int64_t b = 0; b < batch_size; ++b) {
    uint64_t s = task_seed_mix(seed, 11, static_cast<uint64_t>(b));
    int64_t prefix = 0;  // identity
    for (int64_t t = 0; t < n; ++t) {
      const int64_t g = below(s, order);
      prefix = sn_compose(spec.elements, prefix, g);
      tokens[static_cast<size_t>(b * n + t)] = kFirstContentToken + g;
      targets[static_cast<size_t>(b * n + t)] = kFirstContentToken + prefix;
    }
  }
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  Batch out;
  out.tokens = torch::from_blob(tokens.data(), {batch_size, n}, i64).clone();
  out.targets = torch::from_blob(targets.data(), {batch_size, n}, i64).clone();
  out.mask = torch::ones({batch_size, n});
  out.answer = torch::arange(n, i64).unsqueeze(0).expand({batch_size, n}).contiguous();
  out.hops = torch::full({batch_size, n}, -1, i64);
  out.length = n;
  return out;
}

Batch s5_train_batch(const TaskSpec& spec, int64_t batch_size, int64_t step, int64_t total_steps, uint64_t seed) {
  s5_validate(spec);
  const int64_t L = spec.length, lo = std::min(kS5MinLength, L);
  const int phase = task_phase(spec, step, total_steps);
  const int64_t hi = std::max(lo, lo + (L - lo) * (phase + 1) / task_phase_count(spec));
  uint64_t s = task_seed_mix(seed, 12, static_cast<uint64_t>(step));
  const int64_t n = lo + below(s, hi - lo + 1);
  return s5_generate(spec, batch_size, n, task_seed_mix(seed, 2, static_cast<uint64_t>(step)));
}

Batch s5_eval_batch(const TaskSpec& spec, int64_t batch_size, int64_t n, int64_t index, uint64_t seed) {
  return s5_generate(spec, batch_size, n,
                     task_seed_mix(seed, 13 + static_cast<uint64_t>(n), static_cast<uint64_t>(index)));
}

std::vector<S5LengthError> s5_error_by_length(const S5Predictor& predict, const TaskSpec& spec,
                                              const std::vector<int64_t>& lengths, int64_t rows, int64_t batch_size,
                                              uint64_t seed) {
  s5_validate(spec);
  MIXLAB_CHECK(rows >= 1 && batch_size >= 1, "s5_error_by_length: rows and batch_size must be >= 1, got {} and {}",
               rows, batch_size);
  std::vector<S5LengthError> out;
  for (int64_t n : lengths) {
    MIXLAB_CHECK(n >= 1, "s5_error_by_length: lengths must be >= 1, got {}", n);
    S5LengthError e;
    e.length = n;
    int64_t wrong_final = 0, wrong_tokens = 0;
    for (int64_t done = 0, index = 0; done < rows; ++index) {
      const int64_t b = std::min(batch_size, rows - done);
      const Batch batch = s5_eval_batch(spec, b, n, index, seed);
      const torch::Tensor logits = predict(batch.tokens);
      MIXLAB_CHECK(
          logits.dim() == 3 && logits.size(0) == b && logits.size(1) == n && logits.size(2) >= s5_min_vocab(spec),
          "s5_error_by_length: the predictor must return logits (B,T,V) = ({},{},>= {}), got {}", b, n,
          s5_min_vocab(spec), fmt::join(logits.sizes().vec(), ","));
      const torch::Tensor wrong = logits.argmax(-1) != batch.targets;  // (B,T)
      wrong_tokens += wrong.sum().item<int64_t>();
      wrong_final += wrong.select(1, n - 1).sum().item<int64_t>();
      done += b;
    }
    e.rows = rows;
    e.final_error = static_cast<double>(wrong_final) / static_cast<double>(rows);
    e.token_error = static_cast<double>(wrong_tokens) / static_cast<double>(rows * n);
    out.push_back(e);
  }
  return out;
}

void s5_error_csv_write(const std::string& path, const std::vector<S5LengthError>& errors) {
  std::ofstream f(path);
  MIXLAB_CHECK(f.good(), "s5_error_csv_write: cannot open '{}' for writing", path);
  f << "length,rows,final_error,token_error\n";
  for (const auto& e : errors)
    f << fmt::format("{},{},{:.6f},{:.6f}\n", e.length, e.rows, e.final_error, e.token_error);
}

}  // namespace mixlab
