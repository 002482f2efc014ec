// The launch fingerprint (src/dist/launch_fingerprint.cpp): the build identity, the text that
// travels through the store, and the comparison that names each differing field with both values.
#include "mixlab/dist/launch_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "mixlab/version.h"
#include "support/expect_error.h"

namespace launch_fingerprint_test {

namespace {

using mixlab::LaunchFingerprint;

TEST(LaunchFingerprint, ExecutableIdentityIsThisFilesSizeAndVersions) {
  const std::string id = mixlab::executable_identity();
  EXPECT_EQ(id, mixlab::executable_identity());  // computed once, stable
  EXPECT_NE(id.find("mixlab " MIXLAB_VERSION_STRING), std::string::npos) << id;
  EXPECT_NE(id.find("LibTorch "), std::string::npos) << id;
  // The size is the running executable's, as the file system reports it.
  const auto size = std::filesystem::file_size(std::filesystem::read_symlink("/proc/self/exe"));
  EXPECT_NE(id.find("executable of " + std::to_string(size) + " bytes"), std::string::npos) << id;
  EXPECT_NE(id.find("FNV-1a 64 0x"), std::string::npos) << id;
}

TEST(LaunchFingerprint, TextRoundTripsAndMalformedTextIsNamed) {
  LaunchFingerprint f{{"executable", "mixlab 0.1.0, x"}, {"config.d_model", "16"}, {"config.mixer", "\"attention\""}};
  EXPECT_EQ(mixlab::fingerprint_from_text(mixlab::fingerprint_to_text(f), "test"), f);
  expect_error([] { mixlab::fingerprint_from_text("{", "rank 1's launch fingerprint"); },
               {"rank 1's launch fingerprint", "malformed JSON"});
  expect_error([] { mixlab::fingerprint_from_text("[1]", "rank 2's launch fingerprint"); },
               {"rank 2's launch fingerprint", "JSON object", "array"});
  expect_error([] { mixlab::fingerprint_from_text(R"({"steps": 5})", "fp"); }, {"fp", "'steps'", "string", "number"});
}

TEST(LaunchFingerprint, AddJsonPrefixesEveryKey) {
  LaunchFingerprint f;
  mixlab::fingerprint_add_json(f, "config.", nlohmann::json{{"d_model", 16}, {"mixer", "local:8"}, {"lr", 0.001}});
  EXPECT_EQ(f.at("config.d_model"), "16");
  EXPECT_EQ(f.at("config.mixer"), "\"local:8\"");
  EXPECT_EQ(f.at("config.lr"), "0.001");
  EXPECT_EQ(f.size(), 3u);
  expect_error([&] { mixlab::fingerprint_add_json(f, "config.", nlohmann::json::array()); },
               {"config.", "JSON object", "array"});
}

TEST(LaunchFingerprint, DifferenceNamesEachFieldAndBothValues) {
  const LaunchFingerprint a{{"config.d_model", "16"}, {"config.seed", "1"}, {"executable", "A"}};
  EXPECT_EQ(mixlab::fingerprint_difference(a, 0, a, 1), "");

  LaunchFingerprint b = a;
  b["config.d_model"] = "32";
  EXPECT_EQ(mixlab::fingerprint_difference(a, 0, b, 1), "'config.d_model': rank 0 has 16, rank 1 has 32");
  EXPECT_EQ(mixlab::fingerprint_difference(b, 2, a, 0), "'config.d_model': rank 2 has 32, rank 0 has 16");

  b["executable"] = "B";
  b.erase("config.seed");
  b["config.extra"] = "7";
  const std::string d = mixlab::fingerprint_difference(a, 0, b, 1);
  EXPECT_NE(d.find("'config.d_model': rank 0 has 16, rank 1 has 32"), std::string::npos) << d;
  EXPECT_NE(d.find("'config.seed': rank 0 has 1, rank 1 has (absent)"), std::string::npos) << d;
  EXPECT_NE(d.find("'executable': rank 0 has A, rank 1 has B"), std::string::npos) << d;
  EXPECT_NE(d.find("'config.extra': rank 0 has (absent), rank 1 has 7"), std::string::npos) << d;

  // At most max_fields are spelled out; the rest are counted.
  const std::string short_d = mixlab::fingerprint_difference(a, 0, b, 1, 2);
  EXPECT_NE(short_d.find("and 2 more field(s)"), std::string::npos) << short_d;
  EXPECT_EQ(short_d.find("'executable'"), std::string::npos) << short_d;
}

}  // namespace

}  // namespace launch_fingerprint_test
