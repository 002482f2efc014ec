// The brl spec arguments, "w=8:m=8:beta=0.5", read through the one spec grammar (core/spec_args.h).
#include <limits>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"
#include "mixlab/core/spec_args.h"

namespace mixlab {

BrlOptions brl_options_parse(const std::string& spec, const std::string& args) {
  const SpecArgs a(mixer_spec_context(spec), "brl", args,
                   {"w", "m", "block", "hist", "beta", "lambda", "attn", "diff"});
  constexpr double kAny = std::numeric_limits<double>::max();
  BrlOptions o;
  o.window = a.integer("w", o.window, 1, kSpecMaxInt);
  o.slots = a.integer("m", o.slots, 1, kSpecMaxInt);
  o.block = a.integer("block", o.window, 1, kSpecMaxInt);
  o.hist = a.integer("hist", o.block, 1, kSpecMaxInt);
  MIXLAB_CHECK(o.hist % o.block == 0, "{}: brl key 'hist' must be a multiple of the block ({}), got {}",
               mixer_spec_context(spec), o.block, o.hist);
  o.beta = a.real("beta", o.beta, 0.0, 1.0);
  o.lambda = a.real("lambda", o.lambda, -kAny, kAny);
  o.attn = static_cast<BrlAttn>(a.choice("attn", {"softmax", "laplace", "relu2"}, static_cast<size_t>(o.attn)));
  o.diff = a.choice("diff", {"0", "1"}, o.diff ? 1 : 0) == 1;
  return o;
}

}  // namespace mixlab
