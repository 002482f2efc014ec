// mixlab/core/threads.h — one place that decides LibTorch's intra-op thread count.
//
// LibTorch starts with one thread on Debian's build; mixlab defaults to all cores. The
// environment variable MIXLAB_THREADS or the CLI flag --threads overrides it. Either must be an
// integer in [1, threads_max()] = [1, 4 x cores]; anything else is an error naming the source
// (a huge count used to end in "libgomp: Out of memory").
#pragma once

namespace mixlab {

/// The largest accepted thread count: 4 x std::thread::hardware_concurrency() (at least 4).
int threads_max();

/// Sets at::set_num_threads: `requested` > 0 wins, else $MIXLAB_THREADS, else all cores.
/// Returns the count in force. Throws mixlab::Error for a count outside [1, threads_max()].
int threads_configure(int requested = 0);

/// For its lifetime, `n` intra-op threads on the calling thread only, then the count before.
/// OpenMP keeps the count per thread, and LibTorch sets a thread's count from its process-wide
/// one at the thread's first parallel call, so that call is made first. Unlike
/// at::set_num_threads, the process-wide count (the one new threads start with) is untouched.
/// Used by a thread that runs whole operations beside others (mixlab/train/row_groups.h).
class ThisThreadIntraOpThreads {
 public:
  explicit ThisThreadIntraOpThreads(int n);
  ~ThisThreadIntraOpThreads();
  ThisThreadIntraOpThreads(const ThisThreadIntraOpThreads&) = delete;
  ThisThreadIntraOpThreads& operator=(const ThisThreadIntraOpThreads&) = delete;

 private:
  int before_;
};

}  // namespace mixlab
