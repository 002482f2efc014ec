// Multi-series line charts with Cairo (mixlab/analysis/line_chart.h).
#include "mixlab/analysis/line_chart.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "chart_canvas.h"
#include "mixlab/core/error.h"

namespace mixlab {
namespace {

using analysis_detail::text_aligned;

// One axis in drawing units: log2(v) on a log axis, v otherwise; ticks at nice values.
struct Axis {
  bool log = false;
  double lo = 0, hi = 1;
  std::vector<std::pair<double, std::string>> ticks;  // (position in axis units, label)

  double unit(double v) const { return log ? std::log2(v) : v; }
  double frac(double v) const { return (unit(v) - lo) / (hi - lo); }
};

// 2^e with binary prefixes (1Ki = 1024), so the powers of two a context or a byte count takes
// read as themselves: 512, 1Ki, 64Ki, 256Mi.
std::string pow2_label(int e) {
  static const char* const kPrefix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (e >= 10 && e < 70) return fmt::format("{}{}", 1LL << (e % 10), kPrefix[e / 10]);
  if (e >= -6) return fmt::format("{:g}", std::exp2(e));
  return fmt::format("2^{}", e);
}

// A 1-2-5 step giving about `count` intervals over `span`.
double nice_step(double span, double count) {
  const double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

Axis make_axis(bool log, double vmin, double vmax) {
  Axis a;
  a.log = log;
  if (log) {
    const double lo = std::log2(vmin), hi = std::log2(vmax);
    const double pad = std::max(0.25, 0.04 * (hi - lo));  // markers at the ends stay inside
    a.lo = lo - pad, a.hi = hi + pad;
    const double octaves = a.hi - a.lo;
    if (octaves <= 30) {  // powers of two, every `step`-th one so that at most ~9 are labelled
      const int step = std::max(1, static_cast<int>(std::ceil(octaves / 8)));
      // Fewer than four powers of two inside: widen to the ones around the data, so that both
      // ends of the axis are labelled (a 10..100 us latency axis reads 8..128, not 16..64).
      if (std::floor(a.hi) - std::ceil(a.lo) < 3) a.lo = std::floor(a.lo), a.hi = std::ceil(a.hi);
      // From the lowest power of two inside, so that the smallest values are labelled too.
      for (int e = static_cast<int>(std::ceil(a.lo)); e <= a.hi; e += step) a.ticks.emplace_back(e, pow2_label(e));
    } else {  // too wide for readable powers of two: decades
      const double l10 = std::log2(10.0);
      const int step = std::max(1, static_cast<int>(std::ceil(octaves / l10 / 8)));
      for (int d = static_cast<int>(std::ceil(a.lo / l10 / step)) * step; d * l10 <= a.hi; d += step)
        a.ticks.emplace_back(d * l10, fmt::format("1e{}", d));
    }
  } else {
    const double span = vmax - vmin;
    const double pad = span > 0 ? 0.05 * span : std::max(1.0, 0.1 * std::abs(vmin));
    a.lo = vmin - pad, a.hi = vmax + pad;
    const double step = nice_step(a.hi - a.lo, 6);
    for (double t = std::ceil(a.lo / step) * step; t <= a.hi + 1e-9 * step; t += step)
      a.ticks.emplace_back(t, fmt::format("{:g}", std::abs(t) < 1e-9 * step ? 0.0 : t));
  }
  return a;
}

// Marker shapes cycle with the series as the colours do (at a different period), so lines of
// similar colour still differ: circle, square, triangle, diamond.
void marker(cairo_t* cr, size_t series, double x, double y) {
  const double r = 3.5;
  switch (series % 4) {
    case 0:
      cairo_new_sub_path(cr);
      cairo_arc(cr, x, y, r, 0, 2 * M_PI);
      break;
    case 1:
      cairo_rectangle(cr, x - r, y - r, 2 * r, 2 * r);
      break;
    case 2:
      cairo_move_to(cr, x, y - 1.2 * r);
      cairo_line_to(cr, x + 1.1 * r, y + 0.8 * r);
      cairo_line_to(cr, x - 1.1 * r, y + 0.8 * r);
      cairo_close_path(cr);
      break;
    default:
      cairo_move_to(cr, x, y - 1.3 * r);
      cairo_line_to(cr, x + 1.3 * r, y);
      cairo_line_to(cr, x, y + 1.3 * r);
      cairo_line_to(cr, x - 1.3 * r, y);
      cairo_close_path(cr);
  }
  cairo_fill(cr);
}

}  // namespace

namespace {

// One chart drawn with its top edge at `y0` of the canvas (900 x 540 per chart).
void draw_line_chart(cairo_t* cr, const LineChart& chart, double y0) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_min = kInf, x_max = -kInf, y_min = kInf, y_max = -kInf;
  for (const auto& s : chart.series) {
    MIXLAB_CHECK(s.x.size() == s.y.size(), "line_chart_png: series '{}' has {} x values and {} y values", s.label,
                 s.x.size(), s.y.size());
    for (size_t i = 0; i < s.x.size(); ++i) {
      MIXLAB_CHECK(std::isfinite(s.x[i]) && std::isfinite(s.y[i]),
                   "line_chart_png: series '{}' point {} is ({}, {}): values must be finite", s.label, i, s.x[i],
                   s.y[i]);
      MIXLAB_CHECK(!chart.log_x || s.x[i] > 0, "line_chart_png: series '{}' has x = {} on a log x axis (needs x > 0)",
                   s.label, s.x[i]);
      MIXLAB_CHECK(!chart.log_y || s.y[i] > 0, "line_chart_png: series '{}' has y = {} on a log y axis (needs y > 0)",
                   s.label, s.y[i]);
      x_min = std::min(x_min, s.x[i]), x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]), y_max = std::max(y_max, s.y[i]);
    }
    MIXLAB_CHECK((s.lo.empty() && s.hi.empty()) || (s.lo.size() == s.x.size() && s.hi.size() == s.x.size()),
                 "line_chart_png: series '{}' has a band of {} lo and {} hi values for {} points", s.label, s.lo.size(),
                 s.hi.size(), s.x.size());
    for (size_t i = 0; i < s.lo.size(); ++i) {
      MIXLAB_CHECK(
          std::isfinite(s.lo[i]) && std::isfinite(s.hi[i]) && s.lo[i] <= s.hi[i] && (!chart.log_y || s.lo[i] > 0),
          "line_chart_png: series '{}' band {} is [{}, {}]: expected finite lo <= hi{}", s.label, i, s.lo[i], s.hi[i],
          chart.log_y ? " and lo > 0 on a log y axis" : "");
      y_min = std::min(y_min, s.lo[i]), y_max = std::max(y_max, s.hi[i]);
    }
  }
  MIXLAB_CHECK(x_min <= x_max, "line_chart_png: chart '{}' has no points ({} series), nothing to draw", chart.title,
               chart.series.size());
  const Axis ax = make_axis(chart.log_x, x_min, x_max), ay = make_axis(chart.log_y, y_min, y_max);

  const int W = 900, H = 540;
  const double left = 80, right = W - 210, top = y0 + 44, bottom = y0 + H - 60;  // legend to the right
  auto px = [&](double x) { return left + (right - left) * ax.frac(x); };
  auto py = [&](double y) { return bottom - (bottom - top) * ay.frac(y); };
  cairo_save(cr);
  cairo_translate(cr, 0, y0);
  analysis_detail::draw_titles(cr, chart.title, chart.x_label, chart.y_label, left, bottom - y0, H);
  cairo_restore(cr);

  cairo_set_line_width(cr, 1);
  for (const auto& [t, label] : ax.ticks) {
    const double x = left + (right - left) * (t - ax.lo) / (ax.hi - ax.lo);
    cairo_set_source_rgb(cr, 0.87, 0.87, 0.87);
    cairo_move_to(cr, x, top);
    cairo_line_to(cr, x, bottom);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_aligned(cr, x, bottom + 16, 0.5, label);
  }
  for (const auto& [t, label] : ay.ticks) {
    const double y = bottom - (bottom - top) * (t - ay.lo) / (ay.hi - ay.lo);
    cairo_set_source_rgb(cr, 0.87, 0.87, 0.87);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_aligned(cr, left - 6, y + 4, 1.0, label);
  }
  cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
  cairo_rectangle(cr, left, top, right - left, bottom - top);
  cairo_stroke(cr);

  cairo_save(cr);
  cairo_rectangle(cr, left, top, right - left, bottom - top);
  cairo_clip(cr);
  cairo_set_line_width(cr, 1.6);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (size_t k = 0; k < chart.series.size(); ++k) {  // bands first, under every line
    const LineSeries& s = chart.series[k];
    if (s.lo.empty()) continue;
    for (size_t i = 0; i < s.x.size(); ++i) cairo_line_to(cr, px(s.x[i]), py(s.hi[i]));
    for (size_t i = s.x.size(); i-- > 0;) cairo_line_to(cr, px(s.x[i]), py(s.lo[i]));
    cairo_close_path(cr);
    analysis_detail::set_series_color(cr, k);
    cairo_save(cr);
    cairo_clip_preserve(cr);
    cairo_paint_with_alpha(cr, 0.18);
    cairo_restore(cr);
    cairo_new_path(cr);
  }
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const LineSeries& s = chart.series[k];
    analysis_detail::set_series_color(cr, k);
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (i == 0)
        cairo_move_to(cr, px(s.x[i]), py(s.y[i]));
      else
        cairo_line_to(cr, px(s.x[i]), py(s.y[i]));
    }
    cairo_stroke(cr);
    if (s.x.size() <= 40)
      for (size_t i = 0; i < s.x.size(); ++i) marker(cr, k, px(s.x[i]), py(s.y[i]));
  }
  cairo_restore(cr);

  // Legend: one row per series beside the plot, rows squeezed when there are more than fit.
  const double row = std::min(20.0, (bottom - top) / std::max<double>(1, static_cast<double>(chart.series.size())));
  const double lx = right + 16;
  cairo_set_font_size(cr, 11);
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const double y = top + 10 + row * static_cast<double>(k);
    analysis_detail::set_series_color(cr, k);
    cairo_set_line_width(cr, 1.6);
    cairo_move_to(cr, lx, y);
    cairo_line_to(cr, lx + 24, y);
    cairo_stroke(cr);
    marker(cr, k, lx + 12, y);
    cairo_set_source_rgb(cr, 0, 0, 0);
    analysis_detail::text_at(cr, lx + 32, y + 4, chart.series[k].label);
  }
}

}  // namespace

void line_chart_png(const LineChart& chart, const std::string& path) { line_charts_png({chart}, path); }

void line_charts_png(const std::vector<LineChart>& panels, const std::string& path) {
  MIXLAB_CHECK(!panels.empty(), "line_charts_png: no chart to draw into '{}'", path);
  const int H = 540;
  analysis_detail::Canvas canvas(900, H * static_cast<int>(panels.size()));
  for (size_t i = 0; i < panels.size(); ++i) draw_line_chart(canvas.cr(), panels[i], H * static_cast<double>(i));
  canvas.write_png(path, "line_chart_png");
}

}  // namespace mixlab
