// The shared formatters of analysis numbers and rates (mixlab/analysis/format.h).
#include "mixlab/analysis/format.h"

#include <fmt/format.h>

namespace mixlab {

std::string format_bound(int64_t value) {
  if (value == kAnalysisInf) return "∞";
  if (value == kAnalysisNone) return "—";
  return std::to_string(value);
}

std::string format_shortest_path(const ShortestPathStats& s) {
  if (s.infinite) return "∞";
  return (s.exact ? "" : "≥") + std::to_string(s.max);
}

std::string format_congestion(const CongestionReport& c) {
  const int64_t lo = c.lower_bound, hi = c.upper_bound();
  if (lo == kAnalysisNone && hi == kAnalysisNone) return "—";
  if (hi == kAnalysisNone) return "≥" + format_bound(lo);
  if (lo == kAnalysisNone || lo == hi) return format_bound(hi);
  return format_bound(lo) + ".." + format_bound(hi);
}

std::string format_rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

size_t display_width(const std::string& utf8) {
  size_t n = 0;
  for (unsigned char c : utf8) n += (c & 0xC0) != 0x80;  // count lead bytes, skip continuations
  return n;
}

std::string pad_to_width(const std::string& s, size_t width, bool align_right) {
  const size_t d = display_width(s);
  if (d >= width) return s;
  const std::string fill(width - d, ' ');
  return align_right ? fill + s : s + fill;
}

}  // namespace mixlab
