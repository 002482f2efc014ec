// mixlab/model/init_lock.h — one lock for drawing a model's initialisation from LibTorch's
// global generator.
//
// A model's initial weights come from the global CPU generator (torch::manual_seed, then the
// modules' init). Two threads building models at once would interleave their draws, and each
// model would depend on the other's timing. Whoever seeds and builds (compare's jobs), or saves
// the generator's state, builds and restores it (RowGroups' replicas, mixlab/train/row_groups.h),
// holds this lock for the whole of it. It is not the generator's own mutex: the modules' init
// takes that one per draw.
#pragma once

#include <mutex>

namespace mixlab {

std::mutex& model_init_mutex();

}  // namespace mixlab
