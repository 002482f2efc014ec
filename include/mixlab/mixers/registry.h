// mixlab/mixers/registry.h — spec string -> mixer, and the list `mixlab mixers` prints.
//
// Spec grammar: "<family>[:<args>]", e.g. "attention", "local:8", "ssm", "resolvent:pow2+cache",
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

}  // namespace mixlab
