// mixlab/analysis/chart.h — grouped bar charts (PNG), for results people compare side by side.
//
// Cairo lives in the analysis area (plot.cpp draws the pattern pictures); drivers such as
// `mixlab compare` describe what to draw and call this, so no driver links Cairo itself.
//
//   BarChart c;
//   c.title = "Held-out token accuracy per task";
//   c.series = {"copy", "recall"};                       // one colour each, with a legend
//   c.groups = {{"attention", {0.97, 0.42}}, {"ssm", {0.2, 0.1}}};   // one cluster of bars each
//   bar_chart_png(c, "compare.png");
// Values are fractions of `y_max`, drawn as a percentage axis when `percent` is set; an optional
// error range (lo, hi) per bar draws a whisker (e.g. min..max over seeds). NaN values draw no bar.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mixlab {

struct BarGroup {
  std::string label;
  std::vector<double> values;                     // one per series
  std::vector<std::pair<double, double>> ranges;  // optional: (lo, hi) per series, same units
};

struct BarChart {
  std::string title;
  std::vector<std::string> series;
  std::vector<BarGroup> groups;
  double y_max = 1.0;
  bool percent = true;  // axis labels 0%..100% of y_max
};

/// Draws `chart` into a PNG at `path`. Throws mixlab::Error naming the path when it cannot be
/// written, or when a group's value count differs from the series count.
void bar_chart_png(const BarChart& chart, const std::string& path);

}  // namespace mixlab
