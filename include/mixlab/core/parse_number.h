// mixlab/core/parse_number.h — the one strict parser for numbers typed by a user (CLI flags,
// environment variables, mixer and pattern spec arguments).
//
// Strict means: the whole text is one decimal number (no sign for unsigned values, no spaces,
// no trailing characters), and a value outside [lo, hi] is an error, never clamped. Every error
// is a mixlab::Error that names `what` (e.g. "--steps" or "mixer spec 'local:0': window W"),
// the accepted range and the text that came.
// Not supported: hexadecimal, digit separators, locale-dependent decimal points.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace mixlab {

/// A signed decimal integer in [lo, hi].
int64_t parse_int(const std::string& text, const std::string& what, int64_t lo = std::numeric_limits<int64_t>::min(),
                  int64_t hi = std::numeric_limits<int64_t>::max());
/// An integer in [1, hi]; the error says "must be a positive integer".
int64_t parse_positive_int(const std::string& text, const std::string& what,
                           int64_t hi = std::numeric_limits<int64_t>::max());
/// An unsigned decimal integer in [0, 2^64-1] (seeds).
uint64_t parse_uint64(const std::string& text, const std::string& what);
/// A finite decimal floating-point number in [lo, hi].
double parse_double(const std::string& text, const std::string& what, double lo = -std::numeric_limits<double>::max(),
                    double hi = std::numeric_limits<double>::max());

}  // namespace mixlab
