// The process's model-initialisation lock (see init_lock.h).
#include "mixlab/model/init_lock.h"

namespace mixlab {

std::mutex& model_init_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace mixlab
