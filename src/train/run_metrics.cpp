// Reading metrics.jsonl back, and sparklines (mixlab/train/run_metrics.h).
#include "mixlab/train/run_metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "mixlab/core/error.h"

namespace mixlab {

std::vector<nlohmann::json> read_metrics_lines(const std::string& path,
                                               const std::function<void(int64_t line)>& on_skip) {
  std::ifstream in(path);
  MIXLAB_CHECK_IO(in.good(), "cannot read metrics file '{}'", path);
  std::vector<nlohmann::json> lines;
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      if (on_skip) on_skip(number);
      continue;
    }
    lines.push_back(std::move(j));
  }
  return lines;
}

MetricCurve metric_curve(const std::vector<nlohmann::json>& lines, const std::string& key) {
  MetricCurve c;
  for (const auto& j : lines) {
    if (!j.contains(key) || !j[key].is_number() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    c.step.push_back(j["step"].get<int64_t>());
    c.value.push_back(j[key].get<double>());
  }
  return c;
}

std::string sparkline(const std::vector<double>& values, double lo, double hi, size_t width) {
  static const char* const kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (values.empty() || width == 0) return "";
  const size_t n = values.size(), buckets = std::min(n, width);
  std::string out;
  for (size_t b = 0; b < buckets; ++b) {
    const size_t from = b * n / buckets, to = (b + 1) * n / buckets;
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += values[i];
    const double v = sum / static_cast<double>(to - from);
    const double f = hi > lo ? std::clamp((v - lo) / (hi - lo), 0.0, 1.0) : 0.5;
    out += kBlocks[std::min<size_t>(7, static_cast<size_t>(std::lround(f * 7)))];
  }
  return out;
}

}  // namespace mixlab
