// mixlab/analysis/line_chart.h — multi-series line charts (PNG): several quantities, one line
// each, against a common x (e.g. decode latency of every mixer against context).
//
//   LineChart c;
//   c.title = "Decode latency against context";
//   c.x_label = "context (tokens)";  c.log_x = true;
//   c.y_label = "CPU us per token";  c.log_y = true;
//   c.series = {{"attention", {1024, 4096}, {35.8, 120.0}}, {"ssm", {1024, 4096}, {21.9, 21.9}}};
//   line_chart_png(c, "decode_latency.png");
// Each series is a line through its points in the given order, with markers (up to 40 points; a
// longer curve is a plain line), in its own colour and marker shape, over its band if it has one, named in a legend to
// the right of the plot (room for ~20 entries). Axes span the data. A log axis has ticks at powers of two labelled 1,
// 2, 4, ..., 1Ki, 4Ki, 1Mi (binary prefixes: 1Ki = 1024), or at powers of ten (1e3, 1e4, ...) when it spans more than
// 30 octaves. The image is always 900 x 540.
#pragma once

#include <string>
#include <vector>

namespace mixlab {

struct LineSeries {
  std::string label;
  std::vector<double> x, y;  // same length; may be empty (the series is then only in the legend)
  // Optional band (e.g. the range over seeds): empty, or one lo <= y <= hi per point, shaded in
  // the series' colour behind its line.
  std::vector<double> lo, hi;
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<LineSeries> series;
};

/// Draws `chart` into a PNG at `path`. Throws mixlab::Error when the chart has no point, a
/// series' x and y differ in length, a value is not finite, a value on a log axis is <= 0 (each
/// naming the series and the value), or when `path` cannot be written (naming the path).
void line_chart_png(const LineChart& chart, const std::string& path);

/// Several charts stacked in one PNG (900 x 540 each, top to bottom), e.g. held-out accuracy above
/// training loss. The same checks per chart; an empty list is an error.
void line_charts_png(const std::vector<LineChart>& panels, const std::string& path);

}  // namespace mixlab
