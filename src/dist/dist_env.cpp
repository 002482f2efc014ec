// torchrun's environment variables, checked (see dist_env.h).
#include "mixlab/dist/dist_env.h"

#include <cstdlib>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"

namespace mixlab {
namespace {

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

DistEnv dist_env_from_environment() {
  DistEnv e;
  const char* world = env_or_null("WORLD_SIZE");
  if (!world) return e;
  e.launched = true;
  e.world_size = parse_positive_int(world, "environment variable WORLD_SIZE", 1 << 16);
  const char* rank = env_or_null("RANK");
  MIXLAB_CHECK(rank, "environment variable RANK is not set, but WORLD_SIZE = {} is (torchrun sets both)", e.world_size);
  e.rank =
      parse_int(rank, fmt::format("environment variable RANK (WORLD_SIZE = {})", e.world_size), 0, e.world_size - 1);
  if (const char* local = env_or_null("LOCAL_RANK")) {
    e.local_rank = parse_int(local, "environment variable LOCAL_RANK", 0, e.world_size - 1);
  }
  if (e.world_size == 1) return e;  // alone: no rendezvous, MASTER_* are not needed
  const char* addr = env_or_null("MASTER_ADDR");
  MIXLAB_CHECK(addr, "environment variable MASTER_ADDR is not set (the host of rank 0; WORLD_SIZE = {})", e.world_size);
  e.master_addr = addr;
  const char* port = env_or_null("MASTER_PORT");
  MIXLAB_CHECK(port, "environment variable MASTER_PORT is not set (the rendezvous port on {}; WORLD_SIZE = {})",
               e.master_addr, e.world_size);
  e.master_port = parse_int(port, "environment variable MASTER_PORT", 1, 65535);
  return e;
}

}  // namespace mixlab
