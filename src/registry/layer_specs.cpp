// A model's per-layer mixer list (see mixlab/registry/layer_specs.h).
#include "mixlab/registry/layer_specs.h"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/core/spec_args.h"
#include "mixlab/registry/registry.h"

namespace mixlab {

bool mixer_spec_is_layer_list(const std::string& spec) { return spec.find_first_of("|*") != std::string::npos; }

std::vector<MixerLayerItem> mixer_layer_list(const std::string& spec, int64_t layers) {
  MIXLAB_CHECK(layers >= 1, "{}: the model's layer count must be >= 1, got {}", mixer_spec_context(spec), layers);
  MIXLAB_CHECK(!spec.empty(), "{}: the mixer spec is empty; expected '<mixer spec>' or a list '<spec>[*N]|...'",
               mixer_spec_context(spec));
  // Printable text only (as spec_split requires of one spec): the messages below quote items.
  const size_t control = control_byte_offset(spec);
  MIXLAB_CHECK(control == std::string::npos,
               "{}: has a control character (byte {:#04x}) at offset {}; expected printable text",
               mixer_spec_context(spec), static_cast<unsigned char>(spec[control]), control);
  if (!mixer_spec_is_layer_list(spec)) return {MixerLayerItem{spec, 1}};
  std::vector<MixerLayerItem> items;
  int64_t unit = 0;  // layers the list names once
  size_t start = 0, index = 0;
  while (true) {
    const size_t bar = spec.find('|', start);
    const std::string item = spec.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    ++index;
    if (item.empty()) {
      const char* where = bar == std::string::npos ? "after the last '|'" : "between '|'";
      if (start == 0) where = "before the first '|'";
      MIXLAB_FAIL("{}: layer item {} is empty; expected '<mixer spec>' or '<mixer spec>*N' {}",
                  mixer_spec_context(spec), index, where);
    }
    const size_t star = item.find('*');
    std::string member = item.substr(0, star);
    MIXLAB_CHECK(!member.empty(), "{}: layer item '{}' has no mixer spec before '*'; expected '<mixer spec>*N'",
                 mixer_spec_context(spec), item);
    int64_t count = 1;
    if (star != std::string::npos) {
      count = parse_positive_int(
          item.substr(star + 1),
          fmt::format("{}: the repeat count N of layer item '{}' (after '*')", mixer_spec_context(spec), item),
          kSpecMaxInt);
    }
    unit += count;
    items.push_back(MixerLayerItem{std::move(member), count});
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  MIXLAB_CHECK(unit <= layers,
               "{}: the list names {} layers, more than the model's layers = {}; expected at most {} (a list "
               "shorter than the model repeats as a whole)",
               mixer_spec_context(spec), unit, layers, layers);
  MIXLAB_CHECK(layers % unit == 0,
               "{}: the list names {} layers, which does not divide the model's layers = {}; expected a list "
               "length that divides {} (the list repeats as a whole)",
               mixer_spec_context(spec), unit, layers, layers);
  return items;
}

std::vector<std::string> mixer_layer_specs(const std::string& spec, int64_t layers) {
  const std::vector<MixerLayerItem> items = mixer_layer_list(spec, layers);
  int64_t unit = 0;
  for (const auto& item : items) unit += item.count;
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(layers));
  for (int64_t r = 0; r < layers / unit; ++r)
    for (const auto& item : items)
      for (int64_t k = 0; k < item.count; ++k) out.push_back(item.spec);
  return out;
}

void check_mixer_layer_specs(const std::string& spec, int64_t layers, const MixerDims& dims) {
  // The list as written, not expanded: the first layer of each item is all a message needs.
  const std::vector<MixerLayerItem> items = mixer_layer_list(spec, layers);
  if (!mixer_spec_is_layer_list(spec)) {
    check_mixer_spec(spec, dims);
    return;
  }
  std::set<std::string> checked;
  int64_t layer = 0;
  for (const auto& item : items) {
    if (checked.insert(item.spec).second) {  // one check per distinct member
      try {
        check_mixer_spec(item.spec, dims);
      } catch (const Error& e) {
        MIXLAB_FAIL("{}: layer {}: {}", mixer_spec_context(spec), layer, e.what());
      }
    }
    layer += item.count;
  }
}

}  // namespace mixlab
