// mixlab/mixer/parameter_budget.h — the most numbers (parameters and buffers) one mixer layer may
// hold.
//
// Spec keys take sizes up to 2^24 (kSpecMaxInt), so a typo such as "tpsm:d=14993680" or
// "brl:m=9000000" would otherwise ask LibTorch for terabytes and end in an allocator abort or the
// kernel's OOM killer, not in an error that names the key. A family whose keys set the size of its
// weights or buffers counts them from the parsed options, before it allocates any, and checks the
// count here. The budget, max(2^24, 1024·C²), is far above any layer a user trains: an attention
// layer holds 4·C², a GPT-2 block 12·C².
#pragma once

#include <cstdint>
#include <string>

namespace mixlab {

/// The budget at model width C: max(2^24, 1024·C²) parameters.
double mixer_parameter_budget(int64_t d_model);

/// Throws mixlab::Error when `parameters` (a double: counts such as layers·d² overflow int64 for
/// sizes near 2^24) is over the budget. The message names `context` (the spec), the count, the
/// budget at `d_model` and the keys that set it (`keys`, e.g. "d, agg_layers or c").
void check_mixer_parameter_budget(const std::string& context, double parameters, int64_t d_model,
                                  const std::string& keys);

}  // namespace mixlab
