// tests/support/mixer_specs.h — the mixer specs every per-mixer test iterates: one per registered
// family (read from the registry, so a new family is covered without editing a list), plus the
// variants worth covering for families with parameters.
#pragma once

#include <string>
#include <vector>

#include "mixlab/registry/registry.h"

namespace mixlab::testing {

inline std::vector<std::string> mixer_specs_under_test() {
  std::vector<std::string> specs;
  for (const auto& info : mixlab::mixer_families()) {
    if (info.family == "local") {
      specs.push_back("local:3");
    } else if (info.family == "resolvent") {
      for (auto p : {"order:2", "pow2", "pow2+cache", "square+cache", "dense", "band:4", "causal"})
        specs.push_back(std::string("resolvent:") + p);
    } else if (info.family == "ssm") {
      specs.push_back("ssm:4");
    } else {
      specs.push_back(info.family);
    }
  }
  return specs;
}

/// Small dims the per-mixer tests build at (C = 16, H = 2).
inline mixlab::MixerDims small_mixer_dims() {
  mixlab::MixerDims d;
  d.d_model = 16;
  d.n_heads = 2;
  d.max_len = 64;
  return d;
}

}  // namespace mixlab::testing
