// Save / restore of a T-PSM decode state (Alg. 4) through the one state format
// (mixlab/mixer/state_io.h): TpsmState::io lists the fields; save_state / load_state are the
// file forms of Mixer::save_file / load_file, kept for callers that hold a TpsmState.
//
// Entries: position, fill, buffer (B,c,d), chunks t, roots n, then per root (most significant
// first) its level, root (B,c,d) and cached fold (B,c,d). The counter's slot levels are checked
// against the binary digits of t by BinaryCounterScan::restore; position must equal t c + fill.
// The fast path's key/value cache of Inf is not an entry: it is derived from the prefix and the
// buffer and rebuilt by the first fast step after a load or fork.
#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/psm/tpsm.h"

namespace mixlab {

void TpsmState::io(StateArchive& ar) {
  MIXLAB_CHECK(counter_ != nullptr, "tpsm state: io needs a state from TpsmMixer::init_state");
  ar.scalar("position", position_);
  ar.scalar("fill", fill_);
  ar.tensor("buffer", buf_);
  int64_t count = counter_->count();
  int64_t n = static_cast<int64_t>(counter_->slots().size());
  ar.scalar("chunks", count);
  ar.scalar("roots", n);
  if (!ar.loading()) {
    for (size_t i = 0; i < counter_->slots().size(); ++i) {
      auto slot = counter_->slots()[i];  // shares the tensors; the writer does not modify them
      const std::string k = "root" + std::to_string(i);
      ar.scalar(k + ".level", slot.level);
      ar.tensor(k + ".root", slot.root);
      ar.tensor(k + ".fold", slot.fold);
    }
    return;
  }
  const int64_t c = buf_.size(1);
  MIXLAB_CHECK(fill_ >= 0 && fill_ < c && count >= 0 && position_ == count * c + fill_ && n >= 0 && n <= 63,
               "tpsm state: inconsistent counters (position {}, chunks {}, fill {}, roots {}, chunk c = {})", position_,
               count, fill_, n, c);
  std::vector<Counter::Slot> slots;
  for (int64_t i = 0; i < n; ++i) {
    const std::string k = "root" + std::to_string(i);
    Counter::Slot slot;
    slot.root = buf_;  // shape and dtype the stored roots must have
    slot.fold = buf_;
    ar.scalar(k + ".level", slot.level);
    ar.tensor(k + ".root", slot.root);
    ar.tensor(k + ".fold", slot.fold);
    slots.push_back(std::move(slot));
  }
  counter_->restore(count, std::move(slots));
  kv_len_ = 0;  // the key/value cache is derived, not saved: the next fast step rebuilds it
}

void TpsmMixer::save_state(const TpsmState& state, const std::string& path) const {
  MIXLAB_CHECK(state.counter_ != nullptr, "tpsm: save_state needs a state from init_state");
  save_file(state, path);
}

std::unique_ptr<TpsmState> TpsmMixer::load_state(const std::string& path) {
  auto base = load_file(path);
  std::unique_ptr<TpsmState> s(static_cast<TpsmState*>(base.release()));  // init_state made a TpsmState
  return s;
}

}  // namespace mixlab
