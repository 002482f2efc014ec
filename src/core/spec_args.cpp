// The one spec-argument grammar (see mixlab/core/spec_args.h).
#include "mixlab/core/spec_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/shown_text.h"

namespace mixlab {

// The spec escaped (core/shown_text.h): a message quoting it stays one line whatever it holds.
std::string mixer_spec_context(const std::string& spec) {
  return fmt::format("mixer spec '{}'", shown_text(spec, spec.size()));
}

SpecArgs::SpecArgs(std::string context, std::string family, const std::string& args,
                   std::initializer_list<const char*> keys, size_t max_positional)
    : context_(std::move(context)), family_(std::move(family)) {
  // Each declared key with its aliases: "c|chunk" -> {"c", "chunk"}, canonical first.
  std::vector<std::vector<std::string>> known;
  std::vector<std::string> shown;
  for (const char* k : keys) {
    std::vector<std::string> names;
    std::string all = k;
    size_t start = 0;
    while (true) {
      const size_t bar = all.find('|', start);
      names.push_back(all.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    shown.push_back(names.front());
    known.push_back(std::move(names));
  }
  const std::string known_text = shown.empty() ? "none" : fmt::format("{}", fmt::join(shown, ", "));
  if (args.empty()) return;
  // Arguments are printable text: refusing control bytes first keeps every message below, which
  // quotes items, on one line.
  const size_t control = control_byte_offset(args);
  MIXLAB_CHECK(control == std::string::npos,
               "{}: {} arguments have a control character (byte {:#04x}) at offset {}; expected printable text",
               context_, family_, static_cast<unsigned char>(args[control]), control);
  size_t start = 0;
  while (true) {
    const size_t colon = args.find(':', start);
    const std::string item = args.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    MIXLAB_CHECK(!item.empty(), "{}: {} arguments have an empty item (a ':' with nothing {} it)", context_, family_,
                 colon == std::string::npos ? "after" : "before");
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (max_positional == 0) {
        MIXLAB_CHECK(!shown.empty(), "{}: {} takes no arguments, got '{}'", context_, family_, item);
        MIXLAB_FAIL("{}: {} arguments are key=value items (keys: {}), got '{}'", context_, family_, known_text, item);
      }
      MIXLAB_CHECK(positional_.size() < max_positional, "{}: {} takes at most {} argument{} without '=', got '{}'",
                   context_, family_, max_positional, max_positional == 1 ? "" : "s", item);
      positional_.push_back(item);
    } else {
      const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      MIXLAB_CHECK(!key.empty(), "{}: {} item '{}' has no key before '='", context_, family_, item);
      const std::string* canonical = nullptr;
      for (const auto& names : known)
        for (const auto& n : names)
          if (n == key) canonical = &names.front();
      MIXLAB_CHECK(canonical != nullptr, "{}: unknown {} key '{}'; known: {}", context_, family_, key, known_text);
      MIXLAB_CHECK(find(*canonical) == nullptr, "{}: {} key '{}' is given twice", context_, family_, *canonical);
      MIXLAB_CHECK(!value.empty(), "{}: {} key '{}' has an empty value", context_, family_, key);
      values_.emplace_back(*canonical, value);
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
}

const std::string* SpecArgs::find(const std::string& key) const {
  for (const auto& [k, v] : values_)
    if (k == key) return &v;
  return nullptr;
}

bool SpecArgs::has(const std::string& key) const { return find(key) != nullptr; }

std::string SpecArgs::text(const std::string& key, const std::string& fallback) const {
  const std::string* v = find(key);
  return v ? *v : fallback;
}

std::string SpecArgs::key_context(const std::string& key) const {
  return fmt::format("{}: {} key '{}'", context_, family_, key);
}

int64_t SpecArgs::integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
  const std::string* v = find(key);
  if (!v) return fallback;
  return lo == 1 ? parse_positive_int(*v, key_context(key), hi) : parse_int(*v, key_context(key), lo, hi);
}

double SpecArgs::real(const std::string& key, double fallback, double lo, double hi) const {
  const std::string* v = find(key);
  return v ? parse_double(*v, key_context(key), lo, hi) : fallback;
}

size_t SpecArgs::choice(const std::string& key, std::initializer_list<const char*> choices, size_t fallback) const {
  const std::string* v = find(key);
  if (!v) return fallback;
  std::vector<std::string> names(choices.begin(), choices.end());
  for (size_t i = 0; i < names.size(); ++i)
    if (*v == names[i]) return i;
  const std::string list = names.size() == 2
                               ? fmt::format("{} or {}", names[0], names[1])
                               : fmt::format("{} or {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
  MIXLAB_FAIL("{} must be {}, got '{}'", key_context(key), list, *v);
}

int64_t SpecArgs::positional_integer(size_t i, const std::string& what, int64_t fallback, int64_t lo,
                                     int64_t hi) const {
  if (i >= positional_.size()) return fallback;
  const std::string ctx = fmt::format("{}: {}", context_, what);
  return lo == 1 ? parse_positive_int(positional_[i], ctx, hi) : parse_int(positional_[i], ctx, lo, hi);
}

}  // namespace mixlab
