// mixlab/dist/launch.h — `--nproc N`: start N local workers of this program, torchrun-style.
//
// The launcher execs the running executable (/proc/self/exe) N times with the given arguments
// and RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT set, then waits. The
// workers share its stdout/stderr. When a worker fails (non-zero exit or a signal), the
// launcher says which rank and how, sends SIGTERM to the others, then SIGKILL after `grace`, and
// returns that worker's failure as its own exit code (128 + signal for a signal). SIGINT/SIGTERM
// sent to the launcher are passed on to the workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mixlab {

struct LaunchOptions {
  int64_t nproc = 1;
  int64_t master_port = 0;  // 0: a free local port chosen by the launcher
  std::chrono::milliseconds grace{5000};
  /// Extra environment for every worker (NAME=VALUE), e.g. MIXLAB_THREADS.
  std::vector<std::string> extra_env;
};

/// Runs the workers; returns the exit code the launcher should exit with (0 when all succeeded).
/// `args` are the worker's arguments without argv[0]. Throws mixlab::Error for nproc < 1.
int launch_local_workers(const LaunchOptions& options, const std::vector<std::string>& args);

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
int64_t free_local_port();

}  // namespace mixlab
