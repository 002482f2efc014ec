// Parsing, rows and offsets of the pattern kinds. Cache-efficient sets live in cache_sets.cpp.
#include "mixlab/pattern/pattern.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/spec_args.h"

namespace mixlab {

Pattern Pattern::parse(const std::string& spec_in) {
  std::string spec = spec_in;
  Pattern p;
  MIXLAB_CHECK(!spec.empty(),
               "pattern spec is empty; expected one of causal, band:W, dense, order:K, pow2, square, "
               "linear, offsets:1,2,..., optionally with +cache");
  const std::string kCacheSuffix = "+cache";
  std::string body = spec;
  if (body.size() > kCacheSuffix.size() &&
      body.compare(body.size() - kCacheSuffix.size(), kCacheSuffix.size(), kCacheSuffix) == 0) {
    p.cache_ = true;
    body = body.substr(0, body.size() - kCacheSuffix.size());
  }
  std::string name = body, arg;
  bool has_arg = false;
  if (auto colon = body.find(':'); colon != std::string::npos) {
    name = body.substr(0, colon);
    arg = body.substr(colon + 1);
    has_arg = true;
  }
  const std::string context = fmt::format("pattern spec '{}'", spec);
  // A width parameter ("band:8", "order:4"): one positional item of the spec grammar.
  auto width_arg = [&](const char* kind, const char* what) {
    MIXLAB_CHECK(has_arg && !arg.empty(), "{}: {} needs {}, e.g. {}:8", context, kind,
                 std::string(kind) == "band" ? "a width" : "K", kind);
    return SpecArgs(context, kind, arg, {}, 1).positional_integer(0, what, 0, 1, kPatternMaxT);
  };
  auto no_arg = [&](const char* kind) {
    MIXLAB_CHECK(!has_arg, "pattern spec '{}': kind '{}' takes no parameter, got ':{}'", spec, kind, arg);
  };
  if (name == "causal") {
    no_arg("causal");
    p.kind_ = PatternKind::kCausal;
  } else if (name == "band") {
    p.kind_ = PatternKind::kBand;
    p.width_ = width_arg("band", "band width W");
  } else if (name == "dense") {
    no_arg("dense");
    p.kind_ = PatternKind::kDense;
  } else if (name == "order") {
    p.kind_ = PatternKind::kOrder;
    p.width_ = width_arg("order", "order K");
  } else if (name == "pow2") {
    no_arg("pow2");
    p.kind_ = PatternKind::kPow2;
  } else if (name == "square") {
    no_arg("square");
    p.kind_ = PatternKind::kSquare;
  } else if (name == "linear") {
    no_arg("linear");
    p.kind_ = PatternKind::kLinear;
  } else if (name == "offsets") {
    MIXLAB_CHECK(has_arg && !arg.empty(), "pattern spec '{}': offsets needs a list, e.g. offsets:1,2,3,5,8", spec);
    p.kind_ = PatternKind::kOffsets;
    size_t start = 0;
    while (true) {
      size_t comma = arg.find(',', start);
      std::string item = arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      MIXLAB_CHECK(!item.empty(), "{}: an offset is empty, expected a positive integer", context);
      const int64_t v = parse_positive_int(item, context + ": offset", kPatternMaxT);
      if (p.user_offsets_.empty()) {
        MIXLAB_CHECK(v == 1, "pattern spec '{}': offsets must start at 1 (first-order connectivity), got {}", spec, v);
      } else {
        MIXLAB_CHECK(v > p.user_offsets_.back(),
                     "pattern spec '{}': offsets must be strictly increasing, got {} after {}", spec, v,
                     p.user_offsets_.back());
      }
      p.user_offsets_.push_back(v);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    MIXLAB_FAIL(
        "pattern spec '{}': unknown kind '{}'; expected one of causal, band:W, dense, order:K, pow2, square, "
        "linear, offsets:1,2,...",
        spec, name);
  }
  if (p.cache_) {
    MIXLAB_CHECK(p.translation_invariant_family(),
                 "pattern spec '{}': +cache applies only to pow2, square, linear and offsets:..., not to '{}'", spec,
                 name);
  }
  // Canonical text.
  std::string canon = name;
  if (p.kind_ == PatternKind::kBand || p.kind_ == PatternKind::kOrder) canon += ":" + std::to_string(p.width_);
  if (p.kind_ == PatternKind::kOffsets) canon += ":" + fmt::format("{}", fmt::join(p.user_offsets_, ","));
  if (p.cache_) canon += kCacheSuffix;
  p.spec_ = canon;
  return p;
}

bool Pattern::translation_invariant_family() const {
  return kind_ == PatternKind::kPow2 || kind_ == PatternKind::kSquare || kind_ == PatternKind::kLinear ||
         kind_ == PatternKind::kOffsets;
}

bool Pattern::translation_invariant() const { return !cache_; }

int64_t pattern_offset(const Pattern& p, int64_t k) {
  MIXLAB_ASSERT(k >= 0, "negative offset index {}", k);
  switch (p.kind()) {
    case PatternKind::kPow2:
      return k >= 62 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << k);
    case PatternKind::kSquare:
      return k >= 3037000000LL ? std::numeric_limits<int64_t>::max() : k * k + 1;
    case PatternKind::kLinear:
    case PatternKind::kDense:
    case PatternKind::kCausal:
      return k + 1;
    case PatternKind::kOrder:
    case PatternKind::kBand:
      return k < p.width_param() ? k + 1 : -1;
    case PatternKind::kOffsets:
      break;
  }
  // kOffsets: read through the parsed list via offsets_upto (cheap: lists are short).
  auto all = p.offsets_upto(std::numeric_limits<int64_t>::max());
  return k < static_cast<int64_t>(all.size()) ? all[k] : -1;
}

std::vector<int64_t> Pattern::offsets_upto(int64_t max_offset) const {
  std::vector<int64_t> out;
  if (kind_ == PatternKind::kOffsets) {
    for (int64_t v : user_offsets_)
      if (v <= max_offset) out.push_back(v);
    return out;
  }
  if (kind_ == PatternKind::kDense || kind_ == PatternKind::kLinear || kind_ == PatternKind::kCausal) {
    MIXLAB_CHECK(max_offset <= kPatternMaxT, "pattern '{}': offsets requested up to {}, limit {}", spec_, max_offset,
                 kPatternMaxT);
  }
  for (int64_t k = 0;; ++k) {
    int64_t f = pattern_offset(*this, k);
    if (f < 0 || f > max_offset) break;
    out.push_back(f);
  }
  return out;
}

std::vector<int64_t> Pattern::row(int64_t i) const {
  MIXLAB_CHECK(i >= 0, "pattern '{}': row index must be >= 0, got {}", spec_, i);
  std::vector<int64_t> out;
  if (cache_) {
    // Closed form (Prop. 4.12), converted from the seed's 1-based positions.
    auto s = cache_set_closed_form(*this, i + 1);
    out.reserve(s.size());
    for (auto it = s.rbegin(); it != s.rend(); ++it) out.push_back(*it - 1);
    return out;
  }
  for (int64_t f : offsets_upto(i)) out.push_back(i - f);
  return out;
}

int64_t Pattern::row_size(int64_t i) const {
  if (cache_) return static_cast<int64_t>(row(i).size());
  switch (kind_) {
    case PatternKind::kCausal:
    case PatternKind::kDense:
    case PatternKind::kLinear:
      return i;
    case PatternKind::kBand:
    case PatternKind::kOrder:
      return std::min(i, width_);
    default:
      return static_cast<int64_t>(offsets_upto(i).size());
  }
}

int64_t Pattern::max_width(int64_t T) const {
  MIXLAB_CHECK(T > 0 && T <= kPatternMaxT, "pattern '{}': T must be in [1, {}], got {}", spec_, kPatternMaxT, T);
  if (!cache_) return row_size(T - 1);  // rows only grow for plain patterns
  int64_t w = 0;
  // +cache: |S_i| is not monotone; it is bounded by the number of offsets < i.
  for (int64_t i = 0; i < T; ++i) w = std::max<int64_t>(w, row_size(i));
  return w;
}

std::string Pattern::structure_name() const {
  std::string base;
  switch (kind_) {
    case PatternKind::kCausal:
      base = "Attention";
      break;
    case PatternKind::kBand:
      base = fmt::format("Local attention (w={})", width_);
      break;
    case PatternKind::kDense:
      base = "Dense recurrence";
      break;
    case PatternKind::kOrder:
      base = width_ == 1 ? std::string("Diagonal SSM (order 1)") : fmt::format("{}-th order recurrence", width_);
      break;
    case PatternKind::kPow2:
      base = "f(k) = 2^k";
      break;
    case PatternKind::kSquare:
      base = "f(k) = k^2+1";
      break;
    case PatternKind::kLinear:
      base = "f(k) = k+1";
      break;
    case PatternKind::kOffsets:
      base = fmt::format("offsets {}", fmt::join(user_offsets_, ","));
      break;
  }
  return cache_ ? base + " + cache-efficient" : base;
}

std::string Pattern::time_class() const {
  switch (kind_) {
    case PatternKind::kCausal:
    case PatternKind::kDense:
    case PatternKind::kLinear:
      return "O(n)";
    case PatternKind::kBand:
    case PatternKind::kOrder:
      return width_ == 1 ? "O(1)" : "O(k)";
    case PatternKind::kPow2:
      return "O(log2 n)";
    case PatternKind::kSquare:
      return "O(sqrt n)";
    case PatternKind::kOffsets:
      return "O(f^-1(n))";
  }
  return "?";
}

std::string Pattern::cache_class() const {
  if (cache_) return time_class();
  switch (kind_) {
    case PatternKind::kBand:
    case PatternKind::kOrder:
      return width_ == 1 ? "O(1)" : "O(k)";
    default:
      return "O(n)";
  }
}

}  // namespace mixlab
