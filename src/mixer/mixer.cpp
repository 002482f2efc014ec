// The decode engine's shared parts: default prefill (a loop of step), save/load through the one
// state format, fork.
#include "mixlab/mixer/mixer.h"

#include <istream>
#include <ostream>
#include <typeinfo>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"

namespace mixlab {

void MixerState::io(StateArchive&) {
  MIXLAB_FAIL("this decode state ({}) cannot be saved, loaded or forked: it does not list its fields (io)",
              typeid(*this).name());
}

torch::Tensor Mixer::prefill(MixerState& state, const torch::Tensor& x) {
  const std::string fn = spec() + " prefill";
  check_dim(fn.c_str(), "x", x, 3, "(B,T,C)");
  MIXLAB_CHECK(x.size(1) >= 1, "{}: x must have T >= 1, got {}", fn, shape_string(x));
  std::vector<torch::Tensor> ys;
  ys.reserve(static_cast<size_t>(x.size(1)));
  for (int64_t t = 0; t < x.size(1); ++t) ys.push_back(step(state, x.select(1, t)));
  return torch::stack(ys, 1);
}

StateRecord Mixer::state_record(const MixerState& state) const {
  auto ar = StateArchive::writer();
  const_cast<MixerState&>(state).io(ar);  // a writing archive only reads the fields
  StateRecord r;
  r.spec = spec();
  r.batch = state.batch();
  r.position = state.position();
  r.entries = std::move(ar.entries());
  return r;
}

std::unique_ptr<MixerState> Mixer::state_from_record(StateRecord record, const std::string& source) {
  state_check_spec(record, spec(), source);
  auto state = init_state(record.batch);
  auto ar = StateArchive::reader(std::move(record.entries), source);
  state->io(ar);
  ar.finish();
  MIXLAB_CHECK(state->position() == record.position,
               "state '{}': the header says position {}, the entries restore position {} (inconsistent)", source,
               record.position, state->position());
  return state;
}

void Mixer::save(const MixerState& state, std::ostream& out) const { state_write(out, state_record(state)); }

void Mixer::save_file(const MixerState& state, const std::string& path) const {
  state_write_file(path, state_record(state));
}

std::unique_ptr<MixerState> Mixer::load(std::istream& in, const std::string& source) {
  return state_from_record(state_read(in, source), source);
}

std::unique_ptr<MixerState> Mixer::load_file(const std::string& path) {
  return state_from_record(state_read_file(path), path);
}

std::unique_ptr<MixerState> Mixer::fork(const MixerState& state) {
  // The same io as save/load, minus the bytes: tensors are cloned on the way out.
  auto ar = StateArchive::writer(/*copy=*/true);
  const_cast<MixerState&>(state).io(ar);
  auto copy = init_state(state.batch());
  auto rd = StateArchive::reader(std::move(ar.entries()), "fork");
  copy->io(rd);
  rd.finish();
  return copy;
}

}  // namespace mixlab
