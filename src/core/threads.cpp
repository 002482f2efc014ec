#include "mixlab/core/threads.h"

#include <ATen/Parallel.h>
#include <omp.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"

namespace mixlab {

int threads_max() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) * 4; }

int threads_configure(int requested) {
  int n = requested;
  MIXLAB_CHECK(n >= 0 && n <= threads_max(), "--threads must be an integer in [1, {}] (4 x cores), got {}",
               threads_max(), n);
  if (n == 0) {
    if (const char* env = std::getenv("MIXLAB_THREADS"); env && *env) {
      n = static_cast<int>(parse_int(env, "MIXLAB_THREADS", 1, threads_max()));
    }
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  return n;
}

ThisThreadIntraOpThreads::ThisThreadIntraOpThreads(int n) {
  MIXLAB_CHECK(n >= 1, "ThisThreadIntraOpThreads: n must be >= 1, got {}", n);
  at::internal::lazy_init_num_threads();
  before_ = omp_get_max_threads();
  if (before_ != n) omp_set_num_threads(n);
}

ThisThreadIntraOpThreads::~ThisThreadIntraOpThreads() {
  if (omp_get_max_threads() != before_) omp_set_num_threads(before_);
}

}  // namespace mixlab
