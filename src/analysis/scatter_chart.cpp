// Labelled scatter plots with Cairo (mixlab/analysis/scatter_chart.h).
#include "mixlab/analysis/scatter_chart.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chart_canvas.h"
#include "mixlab/core/error.h"

namespace mixlab {

void scatter_chart_png(const ScatterChart& chart, const std::string& path) {
  for (const auto& p : chart.points) {
    MIXLAB_CHECK(std::isfinite(p.x) && std::isfinite(p.y) && std::isfinite(p.y_lo) && std::isfinite(p.y_hi),
                 "scatter_chart_png: point '{}' has a non-finite value", p.label);
    MIXLAB_CHECK(!chart.log_x || p.x > 0, "scatter_chart_png: point '{}' has x = {} on a log axis (needs x > 0)",
                 p.label, p.x);
  }
  auto fx = [&](double x) { return chart.log_x ? std::log2(x) : x; };
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (!chart.points.empty()) {
    x0 = x1 = fx(chart.points[0].x);
    y0 = y1 = chart.points[0].y;
    for (const auto& p : chart.points) {
      x0 = std::min(x0, fx(p.x)), x1 = std::max(x1, fx(p.x));
      y0 = std::min({y0, p.y, p.y_lo < p.y_hi ? p.y_lo : p.y});
      y1 = std::max({y1, p.y, p.y_lo < p.y_hi ? p.y_hi : p.y});
    }
  }
  const double mx = std::max(0.5, 0.08 * (x1 - x0)), my = std::max(1e-3, 0.08 * (y1 - y0));
  x0 -= mx, x1 += mx, y0 -= my, y1 += my;
  const int W = 760, H = 500;
  const double left = 80, right = W - 40, top = 40, bottom = H - 70;
  auto px = [&](double x) { return left + (right - left) * (fx(x) - x0) / (x1 - x0); };
  auto py = [&](double y) { return bottom - (bottom - top) * (y - y0) / (y1 - y0); };

  analysis_detail::Canvas canvas(W, H);
  cairo_t* cr = canvas.cr();
  analysis_detail::draw_titles(cr, chart.title, chart.x_label, chart.y_label, left, bottom, H);
  cairo_set_line_width(cr, 1);
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels: five steps per axis
    const double yv = y0 + (y1 - y0) * i / 5.0, y = py(yv);
    const double xv = x0 + (x1 - x0) * i / 5.0, x = left + (right - left) * i / 5.0;
    cairo_set_source_rgb(cr, 0.87, 0.87, 0.87);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_move_to(cr, x, top);
    cairo_line_to(cr, x, bottom);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, 8, y + 4);
    cairo_show_text(cr, fmt::format("{:.3g}", yv).c_str());
    cairo_move_to(cr, x - 12, bottom + 16);
    cairo_show_text(cr, fmt::format("{:.3g}", chart.log_x ? std::exp2(xv) : xv).c_str());
  }
  for (const auto& p : chart.points) {
    const double x = px(p.x), y = py(p.y);
    cairo_set_source_rgb(cr, 0.27, 0.47, 0.67);
    if (p.y_lo < p.y_hi) {
      cairo_move_to(cr, x, py(p.y_lo));
      cairo_line_to(cr, x, py(p.y_hi));
      cairo_stroke(cr);
    }
    cairo_arc(cr, x, y, 4.5, 0, 2 * M_PI);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x + 7, y - 5);
    cairo_show_text(cr, p.label.c_str());
  }
  canvas.write_png(path, "scatter_chart_png");
}

}  // namespace mixlab
