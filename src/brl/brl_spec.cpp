// Parsing of the brl spec arguments: "w=8:m=8:beta=0.5", every key checked and named in errors.
#include <set>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"
#include "mixlab/core/fail.h"
#include "mixlab/core/parse_number.h"

namespace mixlab {
namespace {

int64_t parse_count(const std::string& spec, const std::string& key, const std::string& value) {
  return parse_positive_int(value, fmt::format("mixer spec '{}': brl key {}", spec, key), int64_t{1} << 24);
}

double parse_real(const std::string& spec, const std::string& key, const std::string& value) {
  return parse_double(value, fmt::format("mixer spec '{}': brl key '{}'", spec, key));
}

}  // namespace

BrlOptions brl_options_parse(const std::string& spec, const std::string& args) {
  BrlOptions o;
  std::set<std::string> seen;
  size_t start = 0;
  while (start < args.size()) {
    const size_t colon = args.find(':', start);
    const std::string item = args.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? args.size() : colon + 1;
    const size_t eq = item.find('=');
    MIXLAB_CHECK(eq != std::string::npos && eq > 0,
                 "mixer spec '{}': brl arguments are key=value (keys w, m, block, beta, lambda, attn, diff), got '{}'",
                 spec, item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    MIXLAB_CHECK(seen.insert(key).second, "mixer spec '{}': brl key '{}' is given twice", spec, key);
    if (key == "w") {
      o.window = parse_count(spec, "'w' (window)", value);
    } else if (key == "m") {
      o.slots = parse_count(spec, "'m' (compressed tokens)", value);
    } else if (key == "block") {
      o.block = parse_count(spec, "'block' (history length)", value);
    } else if (key == "beta") {
      o.beta = parse_real(spec, key, value);
      MIXLAB_CHECK(o.beta >= 0.0 && o.beta <= 1.0, "mixer spec '{}': brl key 'beta' must be in [0, 1], got {}", spec,
                   value);
    } else if (key == "lambda") {
      o.lambda = parse_real(spec, key, value);
    } else if (key == "attn") {
      if (value == "softmax") {
        o.attn = BrlAttn::kSoftmax;
      } else if (value == "laplace") {
        o.attn = BrlAttn::kLaplace;
      } else if (value == "relu2") {
        o.attn = BrlAttn::kRelu2;
      } else {
        MIXLAB_FAIL("mixer spec '{}': brl key 'attn' must be softmax, laplace or relu2, got '{}'", spec, value);
      }
    } else if (key == "diff") {
      MIXLAB_CHECK(value == "0" || value == "1", "mixer spec '{}': brl key 'diff' must be 0 or 1, got '{}'", spec,
                   value);
      o.diff = value == "1";
    } else {
      MIXLAB_FAIL("mixer spec '{}': unknown brl key '{}'; known: w, m, block, beta, lambda, attn, diff", spec, key);
    }
  }
  if (o.block == 0) o.block = o.window;
  return o;
}

}  // namespace mixlab
