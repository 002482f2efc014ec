// Uses the installed library: parse a pattern, build a mixer, run it. Exit 0 on success.
#include <iostream>

#include "mixlab/pattern/pattern.h"
#include "mixlab/registry/registry.h"

int main() {
  auto p = mixlab::Pattern::parse("pow2+cache");
  auto mixer = mixlab::mixer_create("local:4", mixlab::MixerDims{});
  auto y = mixer->forward(torch::randn({1, 10, mixlab::MixerDims{}.d_model}));
  std::cout << p.spec() << " row 19: " << p.row(19).size() << " positions; output " << y.sizes() << "\n";
  return (p.row(19).size() == 5 && y.size(1) == 10) ? 0 : 1;
}
