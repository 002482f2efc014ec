// The mixer parameter budget; see mixlab/mixer/parameter_budget.h.
#include "mixlab/mixer/parameter_budget.h"

#include <algorithm>

#include "mixlab/core/error.h"

namespace mixlab {

namespace {
constexpr double kFloor = 16777216.0;  // 2^24 parameters, 64 MiB in float32
constexpr double kPerWidthSquared = 1024.0;
}  // namespace

double mixer_parameter_budget(int64_t d_model) {
  const double c = static_cast<double>(std::max<int64_t>(d_model, 0));
  return std::max(kFloor, kPerWidthSquared * c * c);
}

void check_mixer_parameter_budget(const std::string& context, double parameters, int64_t d_model,
                                  const std::string& keys) {
  const double budget = mixer_parameter_budget(d_model);
  MIXLAB_CHECK(parameters <= budget,
               "{}: one mixer layer would hold {:.4g} parameters and buffers, more than the {:.4g} a layer may hold at "
               "model width C = {} (max(2^24, 1024·C²)); lower {}",
               context, parameters, budget, d_model, keys);
}

}  // namespace mixlab
