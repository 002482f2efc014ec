// mixlab/registry/layer_specs.h — a model's mixer spec: one mixer spec per layer (hybrid stacks).
//
// A model (mixlab/model/model.h) takes one mixer spec for all its layers, or a per-layer list:
//   "<item>|<item>|..."   '|' separates layers, in block order (block 0 first);
//   "<spec>*N"            an item repeated N times (N a positive integer, at most 2^24);
// and a list shorter than the model repeats as a whole, only when the model's layer count is a
// multiple of its length. With layers = 4:
//   "ssm"                 ssm, ssm, ssm, ssm (a spec without '|' or '*': exactly as before)
//   "ssm*3|attention"     ssm, ssm, ssm, attention (Jamba/Zamba style: a few attention layers)
//   "ssm|attention"       ssm, attention, ssm, attention (the list of 2 repeats twice)
//   "brl:w=8:m=4|local"   brl, local, brl, local (memory mixers keep the model's memory stream)
// Errors (mixlab::Error, one line naming the whole spec, what was expected and what came): an
// empty item ("ssm||local", a leading or trailing '|'), an empty spec before '*' ("*3"), a count
// that is not a positive integer ("ssm*0", "ssm*x", "ssm*2*2"), a list longer than the model,
// and a list whose length does not divide the layer count ("ssm|ssm|local" with 4 layers).
// Each member is a single-mixer spec of the registry (mixlab/registry/registry.h); no family's
// own grammar uses '|' or '*' (their arguments are SpecArgs items, mixlab/core/spec_args.h, and
// pattern specs), and mixer_create refuses a spec with either, naming the list form.
//
// What this is not: a mixer. A DecoderModel builds one registry mixer per block from the list
// (mixer_factory_from_spec); its state_spec() already names every block's spec, so a hybrid's
// decode state and checkpoint hold one entry per block like any other model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixlab/mixer/mixer.h"

namespace mixlab {

/// Whether `spec` is a per-layer list (has '|' or '*'); a plain spec names one mixer for all layers.
bool mixer_spec_is_layer_list(const std::string& spec);

/// One item of the list as written: a member spec and how many consecutive layers it fills.
struct MixerLayerItem {
  std::string spec;
  int64_t count = 1;
};

/// The list as written (a plain spec is one item of count 1), checked against `layers`: the
/// counts sum to a divisor of `layers`, and the list repeats layers / sum times. Checks the list
/// grammar only (see the file header); members are checked by check_mixer_layer_specs and
/// mixer_create. Throws mixlab::Error naming the whole spec; `layers` must be >= 1. Expands
/// nothing, so an absurd layer count costs nothing here.
std::vector<MixerLayerItem> mixer_layer_list(const std::string& spec, int64_t layers);

/// The spec of each of `layers` blocks (block order): mixer_layer_list expanded.
std::vector<std::string> mixer_layer_specs(const std::string& spec, int64_t layers);

/// mixer_layer_specs, then check_mixer_spec on every distinct member at `dims`. A member's error
/// is prefixed with the whole spec and the member's first layer (0-based) when `spec` is a list;
/// a plain spec's errors are check_mixer_spec's own.
void check_mixer_layer_specs(const std::string& spec, int64_t layers, const MixerDims& dims = MixerDims{16, 2, 64});

}  // namespace mixlab
