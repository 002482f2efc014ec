// Exact cost, cache and shortest-path measurements (see mixlab/analysis/metrics.h).
#include "mixlab/analysis/metrics.h"

#include <algorithm>

#include "mixlab/core/error.h"
#include "row_source.h"

namespace mixlab {
namespace analysis_detail {

RowSource::RowSource(const Pattern& p, int64_t T) : cache_(p.cache_efficient()) {
  f_ = p.offsets_upto(T - 1);
  if (cache_) {
    a_ = cache_lattice_steps(p, T);  // a_k for every f(k) < T
    MIXLAB_ASSERT(a_.size() == f_.size(), "lattice steps {} != offsets {}", a_.size(), f_.size());
  }
}

// +cache rows: with I = i + 1 (1-based), S_I = { e_k = a_k ceil((I - f_k) / a_k) : f_k < I }.
// The e_k are non-increasing in k, so the row comes out nearest-first and duplicates are
// adjacent. Proof: e_k is the unique multiple of a_k in [I - f_k, I - f_k + a_k). Since a_{k+1}
// is the smallest multiple of a_k that is >= f_{k+1} - f_k, a_{k+1} < f_{k+1} - f_k + a_k, so
// e_{k+1} < I - f_{k+1} + a_{k+1} < I - f_k + a_k; e_{k+1} is a multiple of a_k (a_k | a_{k+1}),
// hence e_{k+1} <= the largest multiple of a_k below I - f_k + a_k, which is e_k.
void RowSource::row(int64_t i, std::vector<int64_t>& out) const {
  out.clear();
  if (!cache_) {
    for (int64_t f : f_) {
      if (f > i) break;
      out.push_back(i - f);
    }
    return;
  }
  const int64_t I = i + 1;
  for (size_t k = 0; k < f_.size() && f_[k] < I; ++k) {
    int64_t e = a_[k] * ((I - f_[k] + a_[k] - 1) / a_[k]) - 1;  // back to 0-based
    if (out.empty() || out.back() != e) out.push_back(e);
  }
}

int64_t RowSource::oldest(int64_t i) const {
  const int64_t I = i + 1;
  // The last scale with f_k < I gives the oldest element: e_k is non-increasing in k (above).
  const auto K = std::lower_bound(f_.begin(), f_.end(), I) - f_.begin();  // f_k <= i
  if (K == 0) return -1;
  const int64_t k = K - 1;
  if (!cache_) return i - f_[k];
  return a_[k] * ((I - f_[k] + a_[k] - 1) / a_[k]) - 1;
}

int64_t RowSource::row_size(int64_t i) const {
  if (!cache_) return std::upper_bound(f_.begin(), f_.end(), i) - f_.begin();
  const int64_t I = i + 1;
  const size_t K = static_cast<size_t>(std::lower_bound(f_.begin(), f_.end(), I) - f_.begin());  // f_k < I
  int64_t count = 0, last = -1;
  size_t k = 0;
  while (k < K) {
    if (a_[k] == 1) {
      // A run of scales with a_k = 1 (a_k divides a_{k+1}, so such runs come first): there
      // e_k = I - f_k, all distinct, so the run adds its length, minus one if its first element
      // repeats the previous one. O(log K) per row instead of O(K): linear+cache at T = 2^20
      // is near-linear instead of quadratic (issue 16 item 10).
      const size_t end = static_cast<size_t>(std::upper_bound(a_.begin() + k, a_.begin() + K, 1) - a_.begin());
      const int64_t first = I - f_[k];
      count += static_cast<int64_t>(end - k) - (first == last ? 1 : 0);
      last = I - f_[end - 1];
      k = end;
      continue;
    }
    const int64_t e = a_[k] * ((I - f_[k] + a_[k] - 1) / a_[k]);
    if (e != last) ++count;
    last = e;
    ++k;
  }
  return count;
}

}  // namespace analysis_detail

using analysis_detail::RowSource;

void analysis_check_T(const char* fn, int64_t T) {
  MIXLAB_CHECK(T > 0, "{}: T must be > 0, got {}", fn, T);
  MIXLAB_CHECK(T <= kAnalysisMaxT, "{}: T = {} exceeds the analysis limit kAnalysisMaxT = {}", fn, T, kAnalysisMaxT);
}

std::vector<int64_t> analysis_row_sizes(const Pattern& p, int64_t T) {
  analysis_check_T("analysis_row_sizes", T);
  RowSource rows(p, T);
  std::vector<int64_t> out(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) out[i] = rows.row_size(i);
  return out;
}

// Cache after step i = #{ j <= i : last_use(j) > i }, last_use(j) = the last row r < T with
// j ∈ P(r). Two shortcuts, both checked against analysis_cache_sizes_reference in the tests:
//
// (1) Plain (translation-invariant) patterns: row r reads r - f for every offset f <= r, so the
//     rows reading j are { j + f : f offset, j + f <= T - 1 } and
//     last_use(j) = j + max{ f offset : f <= T - 1 - j } (none when j = T - 1).
//     Position j is then counted for i in [j, last_use(j)) — a difference array, O(T + |F|).
//
// (2) +cache: in 1-based terms the cache after step i (i < T) is exactly S_{i+1}.
//     Claim A: the closed-form sets satisfy S_r ⊆ S_{r-1} ∪ {r-1} for r >= 2. Take the element
//       e = a_k ceil((r - f_k) / a_k) of S_r and put m = r - f_k.
//       - f_k = r - 1 (the scale that just appeared): e = a_k. For k = 0, e = 1 = r - 1. For
//         k >= 1, the scale k-1 of S_{r-1} (valid: f_{k-1} < f_k = r - 1) gives
//         a_{k-1} ceil((f_k - f_{k-1}) / a_{k-1}) = a_k by the definition of a_k.
//       - f_k < r - 1 and a_k ∤ (m - 1): ceil(m / a_k) = ceil((m - 1) / a_k), so e is the scale-k
//         element of S_{r-1}.
//       - f_k < r - 1 and a_k | (m - 1): e = m - 1 + a_k. For k = 0 that is r - 1. For k >= 1
//         write m - 1 = q a_k; the scale k-1 element of S_{r-1} is
//         a_{k-1} ceil((q a_k + f_k - f_{k-1}) / a_{k-1}) = q a_k + a_k = e (a_{k-1} | a_k).
//     Claim B: for r > i + 1, S_r ∩ [1, i] ⊆ S_{i+1} — induction on r with Claim A, since r - 1 > i.
//     Row i + 1 reads all of S_{i+1} ⊆ [1, i], so the positions <= i that future rows read are
//     exactly S_{i+1}: cache after step i = |S_{i+1}| = |P(i + 1)| 0-based. O(T·K).
std::vector<int64_t> analysis_cache_sizes(const Pattern& p, int64_t T) {
  analysis_check_T("analysis_cache_sizes", T);
  RowSource rows(p, T);
  std::vector<int64_t> cache(static_cast<size_t>(T), 0);
  if (p.cache_efficient()) {
    for (int64_t i = 0; i + 1 < T; ++i) cache[i] = rows.row_size(i + 1);
    return cache;
  }
  const auto& f = rows.offsets();
  std::vector<int64_t> diff(static_cast<size_t>(T) + 1, 0);
  // j increases, so T - 1 - j decreases: a pointer into the ascending offsets moves down only.
  int64_t top = static_cast<int64_t>(f.size()) - 1;
  for (int64_t j = 0; j < T; ++j) {
    while (top >= 0 && f[top] > T - 1 - j) --top;
    if (top < 0) continue;  // no row reads j (only j = T - 1 here, since f(0) = 1)
    int64_t last_use = j + f[top];
    diff[j] += 1;
    diff[last_use] -= 1;
  }
  int64_t run = 0;
  for (int64_t i = 0; i < T; ++i) {
    run += diff[i];
    cache[i] = run;
  }
  return cache;
}

std::vector<int64_t> analysis_cache_sizes_reference(const Pattern& p, int64_t T) {
  analysis_check_T("analysis_cache_sizes_reference", T);
  std::vector<int64_t> last_use(static_cast<size_t>(T), -1);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t j : p.row(r)) last_use[j] = std::max(last_use[j], r);
  std::vector<int64_t> cache(static_cast<size_t>(T), 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j)
      if (last_use[j] > i) ++cache[i];
  return cache;
}

Pattern analysis_equivalent_pattern(const Pattern& p, int64_t T) {
  analysis_check_T("analysis_equivalent_pattern", T);
  if (!p.cache_efficient()) return p;
  const auto a = cache_lattice_steps(p, T);
  if (!std::all_of(a.begin(), a.end(), [](int64_t step) { return step == 1; })) return p;
  static const std::string kSuffix = "+cache";
  const std::string& spec = p.spec();  // canonical: the suffix is last
  MIXLAB_ASSERT(
      spec.size() > kSuffix.size() && spec.compare(spec.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0,
      "canonical +cache spec '{}' does not end in {}", spec, kSuffix);
  return Pattern::parse(spec.substr(0, spec.size() - kSuffix.size()));
}

PatternGraph pattern_graph_build(const Pattern& p, int64_t T) {
  analysis_check_T("pattern_graph_build", T);
  RowSource rows(p, T);
  PatternGraph g;
  g.T = T;
  g.recurrent = p.recurrent();
  g.start.assign(static_cast<size_t>(T) + 1, 0);
  std::vector<int64_t> buf;
  for (int64_t r = 0; r < T; ++r) {
    rows.row(r, buf);
    g.pred.insert(g.pred.end(), buf.begin(), buf.end());
    g.start[r + 1] = static_cast<int64_t>(g.pred.size());
  }
  return g;
}

std::vector<int32_t> graph_distances_from(const PatternGraph& g, int64_t source, int64_t last) {
  MIXLAB_CHECK(source >= 0 && source < g.T, "graph_distances_from: source must be in [0, {}), got {}", g.T, source);
  MIXLAB_CHECK(last >= source && last < g.T, "graph_distances_from: last must be in [{}, {}), got {}", source, g.T,
               last);
  std::vector<int32_t> dist(static_cast<size_t>(g.T), kUnreachable);
  dist[source] = 0;
  for (int64_t r = source + 1; r <= last; ++r) {
    int32_t best = kUnreachable;
    for (int64_t e = g.start[r]; e < g.start[r + 1]; ++e) {
      int64_t q = g.pred[e];
      if (q < source) break;  // nearest first: the rest are older still
      if (!g.recurrent) {
        // B = 0: only the direct edge source -> r carries information.
        if (q == source) best = 1;
        continue;
      }
      if (dist[q] != kUnreachable) best = std::min(best, dist[q] + 1);
    }
    dist[r] = best;
  }
  return dist;
}

std::vector<int32_t> analysis_distance_by_difference(const Pattern& p, int64_t T) {
  analysis_check_T("analysis_distance_by_difference", T);
  MIXLAB_CHECK(p.translation_invariant(),
               "analysis_distance_by_difference: pattern '{}' is not translation-invariant; use graph distances",
               p.spec());
  auto f = p.offsets_upto(T - 1);
  std::vector<char> is_offset(static_cast<size_t>(T), 0);
  for (int64_t v : f) is_offset[v] = 1;
  std::vector<int32_t> d(static_cast<size_t>(T), kUnreachable);
  d[0] = 0;
  for (int64_t delta = 1; delta < T; ++delta) {
    if (is_offset[delta]) {
      d[delta] = 1;
      continue;
    }
    if (!p.recurrent()) continue;  // attention: no multi-hop paths
    int32_t best = kUnreachable;
    // Largest offsets first; stop at 2, the least a non-offset difference can need.
    auto end = std::upper_bound(f.begin(), f.end(), delta);
    for (auto it = end; it != f.begin() && best > 2;) {
      --it;
      int32_t rest = d[delta - *it];
      if (rest != kUnreachable) best = std::min(best, rest + 1);
    }
    d[delta] = best;
  }
  return d;
}

ShortestPathStats analysis_shortest_path(const Pattern& given, int64_t T, int64_t max_work, int64_t max_stored_edges) {
  analysis_check_T("analysis_shortest_path", T);
  const Pattern p = analysis_equivalent_pattern(given, T);
  MIXLAB_CHECK(max_work > 0, "analysis_shortest_path: max_work must be > 0, got {}", max_work);
  ShortestPathStats s;
  double sum = 0;
  auto add = [&](int32_t d, int64_t weight) {
    s.pairs += weight;
    if (d == kUnreachable) {
      s.unreachable_pairs += weight;
      return;
    }
    s.max = std::max<int64_t>(s.max, d);
    sum += static_cast<double>(d) * static_cast<double>(weight);
  };
  if (p.translation_invariant()) {
    s.method = "coin-change";
    auto d = analysis_distance_by_difference(p, T);
    for (int64_t delta = 1; delta < T; ++delta) add(d[delta], T - delta);  // T - δ pairs
    s.sources = T;
  } else {
    s.method = "graph";
    RowSource rows(p, T);
    int64_t nnz = 0;
    for (int64_t i = 0; i < T; ++i) nnz += rows.row_size(i);
    nnz = std::max<int64_t>(1, nnz);
    int64_t n_sources = T;
    if (static_cast<double>(T) * static_cast<double>(nnz) > static_cast<double>(max_work)) {
      n_sources = std::clamp<int64_t>(max_work / nnz, 1, T);
      s.exact = false;
    }
    // The graph is stored when it has at most max_stored_edges edges (8 bytes each); beyond, rows
    // are recomputed per source (same distances, no O(nnz) memory).
    MIXLAB_ASSERT(p.recurrent(), "non translation-invariant pattern '{}' must be recurrent", p.spec());
    PatternGraph g;
    if (nnz <= max_stored_edges) g = pattern_graph_build(p, T);
    std::vector<int32_t> dist;
    std::vector<int64_t> buf;
    for (int64_t k = 0; k < n_sources; ++k) {
      int64_t source = n_sources == T ? k : k * T / n_sources;  // evenly spaced
      if (g.T == T) {
        dist = graph_distances_from(g, source, T - 1);
      } else {
        dist.assign(static_cast<size_t>(T), kUnreachable);
        dist[source] = 0;
        for (int64_t r = source + 1; r < T; ++r) {
          rows.row(r, buf);
          int32_t best = kUnreachable;
          for (int64_t q : buf) {
            if (q < source) break;  // nearest first
            if (dist[q] != kUnreachable) best = std::min(best, dist[q] + 1);
          }
          dist[r] = best;
        }
      }
      for (int64_t r = source + 1; r < T; ++r) add(dist[r], 1);
    }
    s.sources = n_sources;
  }
  int64_t reachable = s.pairs - s.unreachable_pairs;
  s.infinite = s.unreachable_pairs > 0;
  s.mean = reachable > 0 ? sum / static_cast<double>(reachable) : 0.0;
  return s;
}

}  // namespace mixlab
