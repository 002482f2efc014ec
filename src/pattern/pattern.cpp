// Parsing, rows and offsets of the pattern kinds. Cache-efficient sets live in cache_sets.cpp.
#include "mixlab/pattern/pattern.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/core/spec_args.h"

namespace mixlab {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

// geom:B — the distinct values of ceil(B^k), k >= 0, that are <= max_offset, ascending. Integer
// B multiplies exactly (geom:2 == pow2 bit for bit); a real B uses std::pow. Repeated values
// (B < 2) are skipped by jumping k to the first power above the last value, so the cost is the
// number of values returned, not the number of k (B = 1 + 1e-9 would need ~1e10 k).
std::vector<int64_t> geom_offsets(double b, int64_t max_offset) {
  std::vector<int64_t> out;
  if (max_offset < 1) return out;
  out.push_back(1);
  if (b == std::floor(b)) {
    const auto step = static_cast<int64_t>(b);
    for (int64_t v = 1; v <= max_offset / step;) {
      v *= step;
      out.push_back(v);
    }
    return out;
  }
  const double lb = std::log(b);
  auto value = [&](int64_t k) { return std::ceil(std::pow(b, static_cast<double>(k))); };
  for (int64_t last = 1;;) {
    // The smallest k with B^k > last (then ceil(B^k) > last too, last being an integer).
    auto k = static_cast<int64_t>(std::floor(std::log(static_cast<double>(last)) / lb)) + 1;
    while (k > 1 && value(k - 1) > static_cast<double>(last)) --k;
    while (value(k) <= static_cast<double>(last)) ++k;
    const double v = value(k);
    if (v > static_cast<double>(max_offset)) break;
    last = static_cast<int64_t>(v);
    out.push_back(last);
  }
  return out;
}

// power:P — f(k) = ceil(k^P) + 1. Integer P multiplies exactly (power:2 == square).
int64_t power_offset(double p, int64_t k) {
  if (k == 0) return 1;
  if (p == std::floor(p)) {
    int64_t v = 1;
    for (int64_t e = 0; e < static_cast<int64_t>(p); ++e) {
      if (v > kInf / k) return kInf;
      v *= k;
    }
    return v == kInf ? kInf : v + 1;
  }
  const double v = std::ceil(std::pow(static_cast<double>(k), p));
  return v >= 9.0e18 ? kInf : static_cast<int64_t>(v) + 1;
}

// The distinct Fibonacci numbers 1, 2, 3, 5, 8, ... up to kPatternMaxT.
std::vector<int64_t> fib_offsets() {
  std::vector<int64_t> out{1, 2};
  while (out.back() <= kPatternMaxT) out.push_back(out[out.size() - 1] + out[out.size() - 2]);
  out.pop_back();
  return out;
}

// ruler:L — Wichmann's construction W(r, s): segment lengths 1^r, r+1, (2r+1)^r, (4r+3)^s,
// (2r+2)^(r+1), 1^r; length 4r(r+s+2) + 3(s+1) with 4r+s+3 segments. Every difference up to
// the length is a difference of two marks. Picks the fewest segments, then the shortest length,
// among rulers of length >= L; returns the non-zero marks (the first is 1).
std::vector<int64_t> ruler_offsets(int64_t L) {
  int64_t best_r = -1, best_s = 0, best_segments = kInf, best_length = kInf;
  for (int64_t r = 0; 4 * r * (r + 2) + 3 <= 4 * L + 16; ++r) {
    // The least s with 4r(r+s+2) + 3(s+1) >= L.
    const int64_t base = 4 * r * (r + 2) + 3, per_s = 4 * r + 3;
    const int64_t s = L <= base ? 0 : (L - base + per_s - 1) / per_s;
    const int64_t segments = 4 * r + s + 3, length = base + per_s * s;
    if (segments < best_segments || (segments == best_segments && length < best_length)) {
      best_r = r, best_s = s, best_segments = segments, best_length = length;
    }
  }
  const int64_t r = best_r, s = best_s;
  std::vector<int64_t> segs;
  auto add = [&](int64_t len, int64_t times) {
    for (int64_t t = 0; t < times; ++t) segs.push_back(len);
  };
  add(1, r), add(r + 1, 1), add(2 * r + 1, r), add(4 * r + 3, s), add(2 * r + 2, r + 1), add(1, r);
  std::vector<int64_t> marks;
  int64_t at = 0;
  for (int64_t len : segs) marks.push_back(at += len);
  return marks;
}

// Sorted union of ascending lists, duplicates once.
std::vector<int64_t> merge_offsets(const std::vector<std::vector<int64_t>>& lists) {
  std::vector<int64_t> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Pattern Pattern::parse(const std::string& spec_in) {
  std::string spec = spec_in;
  Pattern p;
  MIXLAB_CHECK(!spec.empty(),
               "pattern spec is empty; expected one of causal, band:W, dense, order:K, pow2, square, "
               "linear, offsets:1,2,..., geom:B, power:P, fib, ruler:L, a union A+B, optionally with +cache");
  // Specs are printable text: refusing control bytes first keeps every message below, which
  // quotes the spec, on one line.
  const size_t control = control_byte_offset(spec);
  MIXLAB_CHECK(control == std::string::npos,
               "pattern spec '{}': has a control character (byte {:#04x}) at offset {}; expected printable text",
               shown_text(spec), static_cast<unsigned char>(spec[control]), control);
  const std::string kCacheSuffix = "+cache";
  std::string body = spec;
  if (body.size() > kCacheSuffix.size() &&
      body.compare(body.size() - kCacheSuffix.size(), kCacheSuffix.size(), kCacheSuffix) == 0) {
    p.cache_ = true;
    body = body.substr(0, body.size() - kCacheSuffix.size());
  }
  if (body.find('+') != std::string::npos) {
    // A union: every '+'-separated operand is a plain translation-invariant kind.
    p.kind_ = PatternKind::kUnion;
    size_t start = 0;
    while (true) {
      const size_t plus = body.find('+', start);
      const std::string item = body.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
      MIXLAB_CHECK(!item.empty(), "pattern spec '{}': an operand of the union is empty; expected e.g. band:8+pow2",
                   spec);
      MIXLAB_CHECK(item != "cache", "pattern spec '{}': +cache must come last, once", spec);
      Pattern part;
      try {
        part = Pattern::parse(item);
      } catch (const Error& e) {
        MIXLAB_FAIL("pattern spec '{}': union operand '{}': {}", spec, item, e.what());
      }
      MIXLAB_CHECK(part.kind_ != PatternKind::kCausal,
                   "pattern spec '{}': union operand 'causal' is not defined by offsets (B = 0); use dense or "
                   "linear for every past position",
                   spec);
      p.parts_.push_back(std::move(part));
      if (plus == std::string::npos) break;
      start = plus + 1;
    }
    std::vector<std::string> canon_parts;
    for (const auto& part : p.parts_) canon_parts.push_back(part.spec());
    p.spec_ = fmt::format("{}", fmt::join(canon_parts, "+")) + (p.cache_ ? kCacheSuffix : "");
    return p;
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
  } else if (name == "geom" || name == "power") {
    const bool geom = name == "geom";
    MIXLAB_CHECK(has_arg && !arg.empty(), "pattern spec '{}': {} needs {}, e.g. {}", spec, name,
                 geom ? "a real base B > 1" : "a real exponent P >= 1", geom ? "geom:1.5" : "power:1.5");
    p.kind_ = geom ? PatternKind::kGeom : PatternKind::kPower;
    p.real_ = parse_double(arg, fmt::format("{}: {}", context, geom ? "base B" : "exponent P"), 1.0,
                           geom ? static_cast<double>(kPatternMaxT) : 64.0);
    MIXLAB_CHECK(!geom || p.real_ > 1.0, "{}: base B must be > 1 (B = 1 has the single offset 1), got {}", context,
                 arg);
  } else if (name == "fib") {
    no_arg("fib");
    p.kind_ = PatternKind::kFib;
    p.user_offsets_ = fib_offsets();
  } else if (name == "ruler") {
    p.kind_ = PatternKind::kRuler;
    MIXLAB_CHECK(has_arg && !arg.empty(), "{}: ruler needs a length L, e.g. ruler:32", context);
    p.width_ = SpecArgs(context, "ruler", arg, {}, 1).positional_integer(0, "ruler length L", 0, 1, kPatternMaxT);
    p.user_offsets_ = ruler_offsets(p.width_);
  } else {
    MIXLAB_FAIL(
        "pattern spec '{}': unknown kind '{}'; expected one of causal, band:W, dense, order:K, pow2, square, "
        "linear, offsets:1,2,..., geom:B, power:P, fib, ruler:L, a union A+B",
        spec, name);
  }
  if (p.cache_) {
    MIXLAB_CHECK(p.translation_invariant_family(),
                 "pattern spec '{}': +cache applies only to pow2, square, linear, offsets:..., geom:B, power:P, fib, "
                 "ruler:L and unions, not to '{}'",
                 spec, name);
  }
  // Canonical text.
  std::string canon = name;
  if (p.kind_ == PatternKind::kBand || p.kind_ == PatternKind::kOrder || p.kind_ == PatternKind::kRuler)
    canon += ":" + std::to_string(p.width_);
  if (p.kind_ == PatternKind::kGeom || p.kind_ == PatternKind::kPower) canon += fmt::format(":{}", p.real_);
  if (p.kind_ == PatternKind::kOffsets) canon += ":" + fmt::format("{}", fmt::join(p.user_offsets_, ","));
  if (p.cache_) canon += kCacheSuffix;
  p.spec_ = canon;
  return p;
}

bool Pattern::translation_invariant_family() const {
  switch (kind_) {
    case PatternKind::kCausal:
    case PatternKind::kBand:
    case PatternKind::kDense:
    case PatternKind::kOrder:
      return false;
    case PatternKind::kPow2:
    case PatternKind::kSquare:
    case PatternKind::kLinear:
    case PatternKind::kOffsets:
    case PatternKind::kGeom:
    case PatternKind::kPower:
    case PatternKind::kFib:
    case PatternKind::kRuler:
    case PatternKind::kUnion:
      return true;
  }
  return false;
}

int64_t Pattern::last_offset() const {
  switch (kind_) {
    case PatternKind::kBand:
    case PatternKind::kOrder:
      return width_;
    case PatternKind::kOffsets:
    case PatternKind::kRuler:
      return user_offsets_.back();
    case PatternKind::kUnion: {
      int64_t last = 0;
      for (const auto& part : parts_) {
        const int64_t l = part.last_offset();
        if (l < 0) return -1;
        last = std::max(last, l);
      }
      return last;
    }
    default:
      return -1;
  }
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
    case PatternKind::kPower:
      return power_offset(p.real_param(), k);
    case PatternKind::kOffsets:
    case PatternKind::kFib:
    case PatternKind::kRuler:
    case PatternKind::kGeom:
      break;
    case PatternKind::kUnion: {
      // The union has at least k + 1 offsets <= any operand's f(k): list up to the least of them.
      int64_t bound = -1;
      for (const auto& part : p.union_parts()) {
        const int64_t f = pattern_offset(part, k);
        if (f > 0) bound = bound < 0 ? f : std::min(bound, f);
      }
      if (bound < 0) bound = std::max<int64_t>(p.last_offset(), 1);  // every operand is a short list
      auto all = p.offsets_upto(std::min(bound, kPatternMaxT));
      return k < static_cast<int64_t>(all.size()) ? all[k] : -1;
    }
  }
  // Lists, and geom (its k-th distinct value has no closed form): read through offsets_upto.
  auto all = p.offsets_upto(kPatternMaxT);
  return k < static_cast<int64_t>(all.size()) ? all[k] : -1;
}

std::vector<int64_t> Pattern::offsets_upto(int64_t max_offset) const {
  std::vector<int64_t> out;
  if (kind_ == PatternKind::kOffsets || kind_ == PatternKind::kFib || kind_ == PatternKind::kRuler) {
    for (int64_t v : user_offsets_)
      if (v <= max_offset) out.push_back(v);
    return out;
  }
  if (kind_ == PatternKind::kGeom) return geom_offsets(real_, std::min(max_offset, kPatternMaxT));
  if (kind_ == PatternKind::kUnion) {
    std::vector<std::vector<int64_t>> lists;
    for (const auto& part : parts_) lists.push_back(part.offsets_upto(max_offset));
    return merge_offsets(lists);
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
    case PatternKind::kGeom:
      base = fmt::format("f(k) = ceil({}^k)", real_);
      break;
    case PatternKind::kPower:
      base = fmt::format("f(k) = ceil(k^{})+1", real_);
      break;
    case PatternKind::kFib:
      base = "f(k) = Fibonacci";
      break;
    case PatternKind::kRuler:
      base = fmt::format("Wichmann ruler (L>={}, {} marks)", width_, user_offsets_.size());
      break;
    case PatternKind::kUnion: {
      std::vector<std::string> names;
      for (const auto& part : parts_)
        names.push_back(part.kind_ == PatternKind::kBand || part.kind_ == PatternKind::kOrder
                            ? fmt::format("offsets 1..{}", part.width_)
                            : part.structure_name());
      base = fmt::format("union of {}", fmt::join(names, " and "));
      break;
    }
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
    case PatternKind::kGeom:
      return fmt::format("O(log_{} n)", real_);
    case PatternKind::kPower:
      return real_ == 1.0 ? std::string("O(n)") : fmt::format("O(n^(1/{}))", real_);
    case PatternKind::kFib:
      return "O(log_phi n)";
    case PatternKind::kRuler:
      return fmt::format("O(1) ({} marks)", user_offsets_.size());
    case PatternKind::kUnion: {
      std::vector<std::string> classes;
      for (const auto& part : parts_) classes.push_back(part.time_class());
      return fmt::format("{}", fmt::join(classes, " + "));
    }
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
      // A finite list keeps its largest offset's window; an unbounded one keeps everything.
      return last_offset() > 0 && kind_ != PatternKind::kOffsets ? fmt::format("O({})", last_offset()) : "O(n)";
  }
}

}  // namespace mixlab
