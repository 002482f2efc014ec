// line_chart_png: writes a fixed-size PNG (read from its IHDR header) for linear and log axes and
// many series, leaves no temporary file behind, and rejects every bad input naming it.
#include "mixlab/analysis/line_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include "support/expect_error.h"

namespace mixlab {
namespace line_chart_test {
namespace {

std::pair<int, int> png_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(png.size(), 24u);
  if (png.size() <= 24) return {0, 0};
  EXPECT_EQ(png.substr(1, 3), "PNG");
  auto be32 = [&](size_t at) {  // IHDR width at byte 16, height at 20, big-endian
    return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  return {be32(16), be32(20)};
}

std::string temp_png(const std::string& name) { return (std::filesystem::path(::testing::TempDir()) / name).string(); }

TEST(LineChart, SeveralSeriesOnLinearAxes) {
  const auto path = temp_png("mixlab_line_linear.png");
  std::filesystem::remove(path);
  LineChart c;
  c.title = "linear";
  c.x_label = "x";
  c.y_label = "y";
  c.series = {{"up", {0, 1, 2, 3}, {0, 1, 4, 9}}, {"down", {0, 1, 2}, {5, -3, -7.5}}, {"empty", {}, {}}};
  line_chart_png(c, path);
  EXPECT_EQ(png_size(path), std::make_pair(900, 540));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  c.series = {{"one point", {2}, {2}}};  // a zero-width range still gets an axis around it
  line_chart_png(c, path);
  EXPECT_EQ(png_size(path), std::make_pair(900, 540));
}

TEST(LineChart, LogAxesWithSixteenSeries) {
  const auto path = temp_png("mixlab_line_log.png");
  std::filesystem::remove(path);
  LineChart c;
  c.title = "log-log";
  c.log_x = c.log_y = true;
  for (int k = 0; k < 16; ++k) {  // every palette colour, each a power law over context 1Ki..64Ki
    LineSeries s;
    s.label = "mixer " + std::to_string(k);
    for (double ctx = 1024; ctx <= 65536; ctx *= 4) {
      s.x.push_back(ctx);
      s.y.push_back(8192.0 * std::pow(ctx / 1024, k / 8.0));
    }
    c.series.push_back(s);
  }
  line_chart_png(c, path);
  EXPECT_EQ(png_size(path), std::make_pair(900, 540));

  c.series = {{"wide", {1e-9, 1e9}, {0.001, 1e12}}};  // more than 30 octaves: decade ticks
  line_chart_png(c, path);
  EXPECT_EQ(png_size(path), std::make_pair(900, 540));
  c.series = {{"narrow", {1.2, 1.4}, {3, 3.1}}};  // no power of two inside: widened to the ones around
  line_chart_png(c, path);
  EXPECT_EQ(png_size(path), std::make_pair(900, 540));
}

TEST(LineChart, RejectsBadInputNamingIt) {
  const auto path = temp_png("mixlab_line_bad.png");
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  LineChart c;
  c.title = "bad";
  expect_error([&] { line_chart_png(c, path); }, {"chart 'bad' has no points", "0 series"});
  c.series = {{"empty", {}, {}}};
  expect_error([&] { line_chart_png(c, path); }, {"has no points", "1 series"});
  c.series = {{"short", {1, 2, 3}, {1, 2}}};
  expect_error([&] { line_chart_png(c, path); }, "series 'short' has 3 x values and 2 y values");
  c.series = {{"nan", {1, 2}, {1, nan}}};
  expect_error([&] { line_chart_png(c, path); }, {"series 'nan' point 1", "finite"});
  c.series = {{"inf", {inf}, {1}}};
  expect_error([&] { line_chart_png(c, path); }, {"series 'inf' point 0", "finite"});
  c.series = {{"zero x", {0, 1}, {1, 2}}};
  line_chart_png(c, path);  // fine on a linear axis
  c.log_x = true;
  expect_error([&] { line_chart_png(c, path); }, {"series 'zero x'", "x = 0", "log x axis"});
  c.series = {{"negative y", {1, 2}, {1, -2}}};
  c.log_y = true;
  expect_error([&] { line_chart_png(c, path); }, {"series 'negative y'", "y = -2", "log y axis"});
  c.series = {{"ok", {1, 2}, {1, 2}}};
  expect_error([&] { line_chart_png(c, "/nonexistent-dir/x.png"); }, {"cannot write", "/nonexistent-dir/x.png"});
}

}  // namespace
}  // namespace line_chart_test
}  // namespace mixlab
