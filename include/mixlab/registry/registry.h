// mixlab/registry/registry.h — spec string -> mixer, and the list `mixlab mixers` prints.
//
// Spec grammar (one for every family): "<family>" or "<family>:<args>" with non-empty <args>.
// An empty spec, an unknown family and a trailing ':' ("local:", "ssm:", "local:8:") are
// errors, and so are '|' and '*', which belong to a model's per-layer list (one mixer spec per
// layer, mixlab/registry/layer_specs.h), not to one mixer. Numeric arguments are positive
// integers up to 2^24, parsed strictly (parse_number.h).
// Examples: "attention", "local:8", "ssm", "resolvent:pow2+cache",
// "toeplitz:heads=4:kernel=3", "gla". Each family is one row of the table in registry.cpp; a
// static_assert on the table size breaks the build if a family is added to MixerFamily and not
// to the table.
#pragma once

#include <string>
#include <vector>

#include "mixlab/mixer/mixer.h"

namespace mixlab {

struct MixerInfo {
  std::string family;       // e.g. "resolvent"
  std::string usage;        // e.g. "resolvent:<pattern spec>"
  std::string description;  // one line
};

/// All registered families, in table order.
const std::vector<MixerInfo>& mixer_families();

/// Creates a mixer from its spec. Throws mixlab::Error naming the spec for unknown families or
/// bad arguments.
MixerPtr mixer_create(const std::string& spec, const MixerDims& dims);

/// Validates `spec` fully (family, every argument, and the constraints it puts on `dims`)
/// without building a model; throws mixlab::Error naming the spec. The CLI calls it before
/// touching any output (e.g. "resolvent:pwo2", "bogus" and "local:0" are rejected here).
void check_mixer_spec(const std::string& spec, const MixerDims& dims = MixerDims{16, 2, 64});

}  // namespace mixlab
