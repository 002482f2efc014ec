// bar_chart_png: writes a PNG of the expected size (read from its IHDR header),
// draws whiskers, and rejects inconsistent input naming the group.
#include "mixlab/analysis/chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "mixlab/analysis/scatter_chart.h"
#include "support/expect_error.h"

namespace mixlab {
namespace chart_test {
namespace {

TEST(BarChart, WritesAPngSizedByTheGroups) {
  const auto path = (std::filesystem::path(::testing::TempDir()) / "mixlab_chart.png").string();
  BarChart c;
  c.title = "test";
  c.series = {"copy", "recall"};
  c.groups = {{"attention", {0.9, 0.4}, {{0.8, 1.0}, {0.3, 0.5}}}, {"ssm", {0.2, std::nan("")}, {}}};
  bar_chart_png(c, path);
  std::ifstream in(path, std::ios::binary);
  const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(png.size(), 24u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  auto be32 = [&](size_t at) {  // IHDR width at byte 16, height at 20, big-endian
    return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  EXPECT_EQ(be32(16), 160 + 110 * 2);
  EXPECT_EQ(be32(20), 460);
}

TEST(BarChart, Errors) {
  BarChart c;
  c.series = {"a", "b"};
  c.groups = {{"g1", {0.5}, {}}};
  expect_error([&] { bar_chart_png(c, "/tmp/x.png"); }, "group 'g1' has 1 values for 2 series");
  c.groups = {{"g1", {0.5, 0.5}, {}}};
  expect_error([&] { bar_chart_png(c, "/nonexistent/dir/x.png"); }, "/nonexistent/dir/x.png");
  c.y_max = 0;
  expect_error([&] { bar_chart_png(c, "/tmp/x.png"); }, "y_max");
}

// scatter_chart_png: a fixed-size PNG (from its IHDR header), with or without points, and every
// rejected input named.
TEST(ScatterChart, WritesAPngAndRejectsBadPoints) {
  const auto path = (std::filesystem::path(::testing::TempDir()) / "mixlab_scatter.png").string();
  auto png_size = [&] {
    std::ifstream in(path, std::ios::binary);
    const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_GT(png.size(), 24u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
    auto be32 = [&](size_t at) {
      return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
             (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
    };
    return std::make_pair(be32(16), be32(20));
  };
  ScatterChart c;
  c.title = "test";
  c.log_x = true;
  c.points = {{"attention", 128, 9.1, 9.0, 9.3}, {"ssm", 1, 12.4, 12.4, 12.4}};
  std::filesystem::remove(path);
  scatter_chart_png(c, path);
  EXPECT_EQ(png_size(), std::make_pair(760, 500));
  c.points.clear();  // an empty chart still draws its axes
  std::filesystem::remove(path);
  scatter_chart_png(c, path);
  EXPECT_EQ(png_size(), std::make_pair(760, 500));

  c.points = {{"zero", 0, 1, 0, 0}};
  expect_error([&] { scatter_chart_png(c, path); }, {"point 'zero'", "log axis"});
  c.log_x = false;
  c.points = {{"nan", 1, std::nan(""), 0, 0}};
  expect_error([&] { scatter_chart_png(c, path); }, {"point 'nan'", "non-finite"});
  c.points = {{"ok", 1, 1, 0, 0}};
  expect_error([&] { scatter_chart_png(c, "/nonexistent-dir/x.png"); }, {"cannot write", "/nonexistent-dir/x.png"});
}

}  // namespace
}  // namespace chart_test
}  // namespace mixlab
