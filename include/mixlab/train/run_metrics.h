// mixlab/train/run_metrics.h — a run's metrics.jsonl read back (the lines mixlab/train/trainer.h
// writes): for `mixlab plot`, and for compare's curves and sparklines.
//
// Every line that is a complete JSON object is kept, in file order. A line that is not (a run
// killed mid-write leaves a torn last line) is skipped and reported to `on_skip` with its 1-based
// number, so a reader draws what is complete and says what it left out.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mixlab {

/// The complete JSON-object lines of `path`. Throws mixlab::Error naming the path when it cannot
/// be opened.
std::vector<nlohmann::json> read_metrics_lines(const std::string& path,
                                               const std::function<void(int64_t line)>& on_skip = nullptr);

/// One metric against step: the lines that hold `key` as a number and an integer "step".
struct MetricCurve {
  std::vector<int64_t> step;
  std::vector<double> value;
};
MetricCurve metric_curve(const std::vector<nlohmann::json>& lines, const std::string& key);

/// A one-line text picture of `values` ("▁▂▄▇█"), one block per value after averaging them into at
/// most `width` buckets; the blocks span [lo, hi] (values outside are clamped). Empty for no value.
std::string sparkline(const std::vector<double>& values, double lo, double hi, size_t width = 24);

}  // namespace mixlab
