// mixlab/analysis/format.h — the one way mixlab prints analysis numbers and rates.
//
// `mixlab analyze` and `mixlab compare` share these, so the same quantity reads the same in
// both tables: an unbounded value is "∞" (some pair is unreachable, or a routing needs infinite
// capacity), a value not measured is "—", a congestion known only up to bounds is "lo..hi" (or
// "≥lo" when no routing was found). JSON output uses "inf" and null instead (analysis_report_json).
#pragma once

#include <cstdint>
#include <string>

#include "mixlab/analysis/analyze.h"

namespace mixlab {

/// kAnalysisInf -> "∞", kAnalysisNone -> "—", otherwise the number.
std::string format_bound(int64_t value);
/// The longest shortest path: "∞" when a pair is unreachable, "≥m" when measured from sampled
/// sources only (a lower bound), otherwise the exact maximum.
std::string format_shortest_path(const ShortestPathStats& s);
/// Congestion as far as it is known: "c" when the bounds meet, "lo..hi" between them, "≥lo"
/// with no routing, "—" when nothing was measured.
std::string format_congestion(const CongestionReport& c);
/// A rate per second with a k / M suffix: 950, 12.3k, 1.25M.
std::string format_rate(double per_second);
/// A duration in seconds as "42s", "3m05s" or "2h07m"; "?" when negative, not finite or
/// beyond 10^7 s.
std::string format_duration(double seconds);

/// Number of terminal columns a UTF-8 string takes (∞, —, ≥ and µ take one each).
size_t display_width(const std::string& utf8);
/// `s` padded with spaces to `width` display columns, on the right (or on the left when
/// `align_right`); a longer string is returned whole, never cut.
std::string pad_to_width(const std::string& s, size_t width, bool align_right = false);

}  // namespace mixlab
