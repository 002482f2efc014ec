// at::parallel_for is a header template: it runs in parallel only where the calling object was
// compiled with OpenMP (issue 17 item 0). These tests fail when mixlab's build drops -fopenmp.
#include "mixlab/core/threads.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "mixlab_test_paths.h"

namespace threads_test {

namespace {

// Restores the thread count a test changed, so later tests see the default.
struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

}  // namespace

TEST(Threads, ParallelForUsesTwoThreadsWhenTwoAreSet) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "this machine has 1 core: nothing to parallelise";
  ThreadCountGuard guard;
  ASSERT_EQ(mixlab::threads_configure(2), 2);
  ASSERT_EQ(at::get_num_threads(), 2);
  std::mutex m;
  std::set<std::thread::id> ids;
  // Grain 1 over 64 items: with 2 threads in force each OpenMP thread gets its own range, however
  // fast the body is. Compiled without OpenMP the pragma is ignored and one thread runs it all.
  at::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u) << "at::parallel_for ran its body on " << ids.size()
                            << " thread(s) with 2 set: this object was compiled without OpenMP";
}

TEST(Threads, ParallelForStaysSerialWithOneThread) {
  ThreadCountGuard guard;
  mixlab::threads_configure(1);
  std::set<std::thread::id> ids;
  at::parallel_for(0, 64, 1, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
  EXPECT_EQ(ids.size(), 1u);
}

// A scope of one intra-op thread on this thread only: at::parallel_for runs serially inside it,
// the count comes back after it, and a thread started meanwhile gets the process-wide count.
TEST(Threads, ThisThreadScopeChangesOnlyThisThread) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "this machine has 1 core";
  ThreadCountGuard guard;
  mixlab::threads_configure(2);
  int other = 0;
  {
    mixlab::ThisThreadIntraOpThreads one(1);
    EXPECT_EQ(at::get_num_threads(), 1);
    std::set<std::thread::id> ids;
    at::parallel_for(0, 64, 1, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
    EXPECT_EQ(ids.size(), 1u);
    std::thread([&] { other = at::get_num_threads(); }).join();
  }
  EXPECT_EQ(other, 2);
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_ANY_THROW(mixlab::ThisThreadIntraOpThreads(0));
}

// The kernels' own objects: a library compiled with -fopenmp that reaches `#pragma omp parallel`
// calls GOMP_parallel. The resolvent op's at::parallel_for is the one every resolvent mixer uses.
TEST(Threads, KernelLibrariesCallTheOpenMpRuntime) {
  if (std::system("command -v nm >/dev/null 2>&1") != 0) GTEST_SKIP() << "nm is not available";
  for (const char* lib : {"libmixlab_resolvent.a", "libmixlab_toeplitz.a"}) {
    const std::string path = std::string(MIXLAB_BINARY_DIR) + "/" + lib;
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
    } else {
      GTEST_SKIP() << path << " is not built (this test reads the build tree)";
    }
    const std::string cmd = "nm -A " + path + " 2>/dev/null | grep -c ' U GOMP_parallel'";
    std::FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr) << cmd;
    char buf[64] = {0};
    const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
    pclose(pipe);  // grep -c exits 1 on a count of 0: the count, not the status, decides
    EXPECT_GT(std::stoi(got ? buf : "0"), 0) << lib << " has no GOMP_parallel reference: compiled without -fopenmp";
  }
}

}  // namespace threads_test
