#include "mixlab/core/threads.h"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "mixlab/core/error.h"

namespace mixlab {

int threads_configure(int requested) {
  int n = requested;
  if (n <= 0) {
    if (const char* env = std::getenv("MIXLAB_THREADS"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      MIXLAB_CHECK(end && *end == '\0' && v > 0, "MIXLAB_THREADS must be a positive integer, got '{}'", env);
      n = static_cast<int>(v);
    }
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  return n;
}

}  // namespace mixlab
