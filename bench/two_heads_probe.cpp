// Two heads of the diagonal decay's forward (per-key gate, Dk = Dv = 64, float) on two threads of
// one process, with no LibTorch and no mixlab: why two heads on two threads gained about 1.3x
// instead of 2x (issue 38 item 4, docs/log/benchmarks-2026-12.md, "Threads at B·H = 2").
//
// Not part of the build or the suite: a probe, compiled and run by hand on an idle machine:
//   g++ -O3 -march=native -fopenmp bench/two_heads_probe.cpp -o /tmp/two_heads_probe
//   OMP_WAIT_POLICY=active /tmp/two_heads_probe [T=16384] [reps=60] [state_gap=0] [layout=0]
// (OMP_WAIT_POLICY=active: with passive waiting the worker thread sleeps between calls, and on a
// VM waking it took milliseconds in some takes, which hides the effect under study.)
//
// The inner loop is the kernel's (affine_fused_kernels.inc, diag_decay_columns with W = 4 vectors
// of 16 floats): S_i = a_i S_i + k_i v, o += q_i S_i, the 16 KiB state in L1 for the whole call.
// `layout` chooses, per array, whether head 1 reads and writes the second half of one allocation
// holding both heads (as in a (B,H,T,D) tensor: bit clear) or an allocation of its own (bit set):
// 1 q, 2 k, 4 v, 8 a, 16 out, 32 head 1's state, 64 head 0's state too. `state_gap` puts that
// many floats between the two heads' states in the shared allocation.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Vec = float __attribute__((vector_size(64), aligned(4)));
constexpr int64_t kDk = 64, kDv = 64, kLanes = 16;

Vec load(const float* p) {
  Vec x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
void store(float* p, Vec x) { std::memcpy(p, &x, sizeof x); }

struct Head {
  const float *q, *k, *v, *a;
  float *out, *state;
};

__attribute__((noinline)) void run_head(const Head& h, int64_t T) {
  for (int64_t t = 0; t < T; ++t) {
    const float *qt = h.q + t * kDk, *kt = h.k + t * kDk, *at = h.a + t * kDk, *vt = h.v + t * kDv;
    Vec vv[4], acc[4];
    for (int w = 0; w < 4; ++w) {
      vv[w] = load(vt + kLanes * w);
      acc[w] = Vec{};
    }
    float* row = h.state;
    for (int64_t i = 0; i < kDk; ++i, row += kDv) {
      const float ai = at[i], ki = kt[i], qi = qt[i];
#pragma GCC unroll 4
      for (int w = 0; w < 4; ++w) {
        const Vec s = load(row + kLanes * w) * ai + vv[w] * ki;
        store(row + kLanes * w, s);
        acc[w] += s * qi;
      }
    }
    for (int w = 0; w < 4; ++w) store(h.out + t * kDv + kLanes * w, acc[w]);
  }
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A page-aligned allocation of n floats, filled (so that every page is touched before timing).
float* filled(int64_t n, float value) {
  const size_t bytes = ((static_cast<size_t>(n) * sizeof(float) + 4095) / 4096) * 4096;
  auto* p = static_cast<float*>(std::aligned_alloc(4096, bytes));
  if (!p) std::abort();
  for (int64_t i = 0; i < n; ++i) p[i] = value + 0.001f * static_cast<float>(i % 97);
  return p;
}

double median_ms(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2] * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 16384;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 60;
  const int64_t state_gap = argc > 3 ? std::atoll(argv[3]) : 0;
  const int layout = argc > 4 ? std::atoi(argv[4]) : 0;
  const int64_t n = T * kDk;  // kDk == kDv: one size for every per-token array
  // Both heads in one allocation per array (the tensor layout) ...
  float *q = filled(2 * n, 0.5f), *k = filled(2 * n, 0.5f), *v = filled(2 * n, 0.5f), *a = filled(2 * n, 0.99f),
        *out = filled(2 * n, 0.f), *state = filled(2 * (kDk * kDv) + state_gap, 0.f);
  Head joint[2];
  for (int h = 0; h < 2; ++h)
    joint[h] = {q + h * n, k + h * n, v + h * n, a + h * n, out + h * n, state + h * (kDk * kDv + state_gap)};
  // ... and each head's arrays in allocations of their own.
  Head own[2];
  for (auto& h : own)
    h = {filled(n, 0.5f), filled(n, 0.5f), filled(n, 0.5f), filled(n, 0.99f), filled(n, 0.f), filled(kDk * kDv, 0.f)};
  Head mixed[2] = {joint[0], joint[1]};
  if (layout & 1) mixed[1].q = own[1].q;
  if (layout & 2) mixed[1].k = own[1].k;
  if (layout & 4) mixed[1].v = own[1].v;
  if (layout & 8) mixed[1].a = own[1].a;
  if (layout & 16) mixed[1].out = own[1].out;
  if (layout & 32) mixed[1].state = own[1].state;
  if (layout & 64) mixed[0].state = own[0].state;

  auto alone = [&](const Head& h, const char* what) {
    std::vector<double> took;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      run_head(h, T);
      took.push_back(now() - t0);
    }
    std::printf("%-44s %.3f ms\n", what, median_ms(took));
  };
  auto two_threads = [&](const Head* heads, const char* what) {
    std::vector<double> total, head0, head1;
    for (int r = 0; r < reps; ++r) {
      double took[2];
      const double t0 = now();
#pragma omp parallel for num_threads(2) schedule(static, 1)
      for (int h = 0; h < 2; ++h) {
        const double s = now();
        run_head(heads[h], T);
        took[h] = now() - s;
      }
      total.push_back(now() - t0);
      head0.push_back(took[0]);
      head1.push_back(took[1]);
    }
    std::printf("%-44s %.3f ms (head 0 %.3f, head 1 %.3f)\n", what, median_ms(total), median_ms(head0),
                median_ms(head1));
  };
  std::printf("T %lld, %d calls each, state gap %lld floats, layout %d; medians\n", static_cast<long long>(T), reps,
              static_cast<long long>(state_gap), layout);
  alone(joint[0], "1 thread, head 0 alone (shared allocations)");
  alone(joint[1], "1 thread, head 1 alone (shared allocations)");
  two_threads(joint, "2 threads, shared allocations");
  two_threads(own, "2 threads, allocations of their own");
  two_threads(mixed, "2 threads, the layout argument's mix");
  return 0;
}
