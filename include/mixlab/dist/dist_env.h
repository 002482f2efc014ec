// mixlab/dist/dist_env.h — where this process sits in a data-parallel launch.
//
// The interface is torchrun's environment, so a launch across machines needs nothing of ours:
//   RANK         this process, 0 .. WORLD_SIZE-1 (rank 0 writes checkpoints, metrics, progress)
//   WORLD_SIZE   number of processes in the launch
//   LOCAL_RANK   this process on its machine (informational)
//   MASTER_ADDR  host of rank 0, which serves the TCPStore rendezvous
//   MASTER_PORT  its port
// `mixlab train --nproc N` sets exactly these for N local workers (mixlab/dist/launch.h).
// Without WORLD_SIZE the process trains alone (world 1) and the other variables are ignored.
#pragma once

#include <cstdint>
#include <string>

namespace mixlab {

struct DistEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  /// True when WORLD_SIZE was set (even to 1): the process was started by a launcher.
  bool launched = false;
};

/// Reads torchrun's variables. Throws mixlab::Error naming the variable, what was expected and
/// what came (RANK outside [0, WORLD_SIZE), a port outside [1, 65535], a missing MASTER_PORT...).
DistEnv dist_env_from_environment();

}  // namespace mixlab
