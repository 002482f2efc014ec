// mixlab/analysis/scatter_chart.h — labelled scatter plots (PNG): one quantity against a cost.
//
//   ScatterChart c;
//   c.title = "Brown perplexity against per-token cost";
//   c.x_label = "positions read per token (log2)";  c.log_x = true;
//   c.y_label = "valid perplexity";
//   c.points = {{"attention", 128, 9.1, 9.0, 9.3}, {"ssm", 1, 12.4, 12.4, 12.4}};
//   scatter_chart_png(c, "compare_lm.png");
// Each point is a dot with its label beside it and, when y_lo < y_hi, a vertical whisker
// (e.g. min..max over seeds). Axes span the data with a margin; a log x axis needs x > 0.
// Not supported: several series, legends, log y.
#pragma once

#include <string>
#include <vector>

namespace mixlab {

struct ScatterPoint {
  std::string label;
  double x = 0, y = 0;
  double y_lo = 0, y_hi = 0;  // whisker; none when y_lo >= y_hi
};

struct ScatterChart {
  std::string title, x_label, y_label;
  bool log_x = false;
  std::vector<ScatterPoint> points;
};

/// Draws `chart` into a PNG at `path`. Throws mixlab::Error naming the path when it cannot be
/// written, when a value is not finite, or when log_x is set and an x is <= 0.
void scatter_chart_png(const ScatterChart& chart, const std::string& path);

}  // namespace mixlab
