#include "mixlab/core/parse_number.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

// What a user sees of the text: short, printable (a fuzzed spec must not spill binary).
std::string shown(const std::string& text) {
  std::string r;
  for (char c : text.substr(0, 40)) r += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) ? c : '?';
  return text.size() > 40 ? r + "..." : r;
}

bool all_digits(const std::string& s, size_t from) {
  if (s.size() <= from) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

}  // namespace

int64_t parse_int(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  const bool ok_form = all_digits(text, (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0);
  MIXLAB_CHECK(ok_form, "{} must be an integer in [{}, {}], got '{}'", what, lo, hi, shown(text));
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  MIXLAB_CHECK(errno != ERANGE && v >= lo && v <= hi, "{} must be an integer in [{}, {}], got {} (out of range)", what,
               lo, hi, shown(text));
  return static_cast<int64_t>(v);
}

int64_t parse_positive_int(const std::string& text, const std::string& what, int64_t hi) {
  MIXLAB_CHECK(all_digits(text, 0), "{} must be a positive integer, got '{}'", what, shown(text));
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  MIXLAB_CHECK(errno != ERANGE && v >= 1 && v <= hi, "{} must be a positive integer in [1, {}], got {}", what, hi,
               shown(text));
  return static_cast<int64_t>(v);
}

uint64_t parse_uint64(const std::string& text, const std::string& what) {
  MIXLAB_CHECK(all_digits(text, 0), "{} must be an integer in [0, 18446744073709551615], got '{}'", what, shown(text));
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  MIXLAB_CHECK(errno != ERANGE, "{} must be an integer in [0, 18446744073709551615], got {} (out of range)", what,
               shown(text));
  return static_cast<uint64_t>(v);
}

double parse_double(const std::string& text, const std::string& what, double lo, double hi) {
  // strtod accepts leading spaces, hex, "inf" and "nan": allow only a plain decimal form.
  bool ok_form = !text.empty();
  for (char c : text)
    ok_form = ok_form && ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+');
  errno = 0;
  char* end = nullptr;
  const double v = ok_form ? std::strtod(text.c_str(), &end) : 0.0;
  ok_form = ok_form && end && *end == '\0';
  MIXLAB_CHECK(ok_form, "{} must be a number, got '{}'", what, shown(text));
  MIXLAB_CHECK(errno != ERANGE && std::isfinite(v) && v >= lo && v <= hi, "{} must be a number in [{:g}, {:g}], got {}",
               what, lo, hi, shown(text));
  return v;
}

}  // namespace mixlab
