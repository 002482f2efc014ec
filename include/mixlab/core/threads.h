// mixlab/core/threads.h — one place that decides LibTorch's intra-op thread count.
//
// LibTorch starts with one thread on Debian's build; mixlab defaults to all cores. The
// environment variable MIXLAB_THREADS or the CLI flag --threads overrides it.
#pragma once

namespace mixlab {

/// Sets at::set_num_threads: `requested` > 0 wins, else $MIXLAB_THREADS, else all cores.
/// Returns the count in force.
int threads_configure(int requested = 0);

}  // namespace mixlab
