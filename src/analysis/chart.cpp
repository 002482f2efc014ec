// Grouped bar charts with Cairo (mixlab/analysis/chart.h).
#include "mixlab/analysis/chart.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chart_canvas.h"
#include "mixlab/core/error.h"

namespace mixlab {

using analysis_detail::set_series_color;
using analysis_detail::text_at;

void bar_chart_png(const BarChart& chart, const std::string& path) {
  MIXLAB_CHECK(chart.y_max > 0 && std::isfinite(chart.y_max), "bar_chart_png: y_max must be finite and > 0, got {}",
               chart.y_max);
  for (const auto& g : chart.groups) {
    MIXLAB_CHECK(g.values.size() == chart.series.size(), "bar_chart_png: group '{}' has {} values for {} series",
                 g.label, g.values.size(), chart.series.size());
    MIXLAB_CHECK(g.ranges.empty() || g.ranges.size() == chart.series.size(),
                 "bar_chart_png: group '{}' has {} ranges for {} series", g.label, g.ranges.size(),
                 chart.series.size());
  }
  const size_t n_groups = std::max<size_t>(chart.groups.size(), 1);
  const size_t n_series = std::max<size_t>(chart.series.size(), 1);
  const int W = 160 + 110 * static_cast<int>(n_groups), H = 460;
  analysis_detail::Canvas canvas(W, H);
  cairo_t* cr = canvas.cr();
  const double left = 70, right = W - 150, top = 40, bottom = H - 120;
  auto y_of = [&](double v) { return bottom - (bottom - top) * std::clamp(v / chart.y_max, 0.0, 1.0); };

  cairo_set_font_size(cr, 14);
  text_at(cr, left, 24, chart.title);

  cairo_set_font_size(cr, 11);
  for (int g = 0; g <= 100; g += 20) {  // grid at every fifth of the axis
    const double y = bottom - (bottom - top) * g / 100.0;
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, left, y);
    cairo_line_to(cr, right, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, left - 40, y + 4,
            chart.percent ? fmt::format("{}%", g) : fmt::format("{:.3g}", chart.y_max * g / 100.0));
  }

  const double group_w = (right - left) / static_cast<double>(n_groups);
  const double bar_w = group_w * 0.8 / static_cast<double>(n_series);
  for (size_t i = 0; i < chart.groups.size(); ++i) {
    const BarGroup& g = chart.groups[i];
    const double x0 = left + group_w * static_cast<double>(i) + group_w * 0.1;
    for (size_t k = 0; k < g.values.size(); ++k) {
      const double x = x0 + bar_w * static_cast<double>(k);
      if (std::isfinite(g.values[k])) {
        set_series_color(cr, k);
        const double y = y_of(g.values[k]);
        cairo_rectangle(cr, x, y, bar_w * 0.92, bottom - y);
        cairo_fill(cr);
      }
      if (!g.ranges.empty() && std::isfinite(g.ranges[k].first) && std::isfinite(g.ranges[k].second)) {
        const double xc = x + bar_w * 0.46;  // whisker: a vertical line with caps
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 1.2);
        cairo_move_to(cr, xc, y_of(g.ranges[k].first));
        cairo_line_to(cr, xc, y_of(g.ranges[k].second));
        for (double v : {g.ranges[k].first, g.ranges[k].second}) {
          cairo_move_to(cr, xc - bar_w * 0.2, y_of(v));
          cairo_line_to(cr, xc + bar_w * 0.2, y_of(v));
        }
        cairo_stroke(cr);
      }
    }
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x0 + group_w * 0.2, bottom + 10);
    cairo_rotate(cr, M_PI / 5);
    cairo_show_text(cr, g.label.c_str());
    cairo_restore(cr);
  }
  for (size_t k = 0; k < chart.series.size(); ++k) {  // legend
    set_series_color(cr, k);
    cairo_rectangle(cr, right + 20, top + 22.0 * static_cast<double>(k), 14, 14);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, right + 40, top + 22.0 * static_cast<double>(k) + 12, chart.series[k]);
  }
  canvas.write_png(path, "bar_chart_png");
}

}  // namespace mixlab
