// bar_chart_png: writes a PNG of the expected size (read from its IHDR header),
// draws whiskers, and rejects inconsistent input naming the group.
#include "mixlab/analysis/chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/expect_error.h"

namespace mixlab {
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

}  // namespace
}  // namespace mixlab
