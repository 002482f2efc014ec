// Parsing of the brl spec arguments: "w=8:m=8:beta=0.5", every key checked and named in errors.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include "mixlab/brl/brl_mixer.h"
#include "mixlab/core/error.h"
#include "mixlab/core/fail.h"

namespace mixlab {
namespace {

int64_t parse_int(const std::string& spec, const std::string& key, const std::string& value) {
  MIXLAB_CHECK(!value.empty() && value.size() < 10 && value.find_first_not_of("-0123456789") == std::string::npos,
               "mixer spec '{}': brl key '{}' must be an integer, got '{}'", spec, key, value);
  return std::stoll(value);
}

double parse_real(const std::string& spec, const std::string& key, const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  MIXLAB_CHECK(!value.empty() && end == begin + value.size() && errno == 0 && std::isfinite(v),
               "mixer spec '{}': brl key '{}' must be a real number, got '{}'", spec, key, value);
  return v;
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
      o.window = parse_int(spec, key, value);
      MIXLAB_CHECK(o.window > 0, "mixer spec '{}': brl key 'w' (window) must be > 0, got {}", spec, o.window);
    } else if (key == "m") {
      o.slots = parse_int(spec, key, value);
      MIXLAB_CHECK(o.slots > 0, "mixer spec '{}': brl key 'm' (compressed tokens) must be > 0, got {}", spec, o.slots);
    } else if (key == "block") {
      o.block = parse_int(spec, key, value);
      MIXLAB_CHECK(o.block > 0, "mixer spec '{}': brl key 'block' (history length) must be > 0, got {}", spec, o.block);
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
