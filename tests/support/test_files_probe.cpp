// A test executable for tests/support/test_files_check.sh: its one test writes a file under
// ::testing::TempDir() and one under std::filesystem::temp_directory_path() (the two ways the
// tests find a temporary folder) and fails when MIXLAB_PROBE_FAIL=1, so the check can see where the files of
// a passing and of a failing process end up (test_main.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

TEST(TestFiles, WritesUnderTempDirAndFailsOnRequest) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "probe";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "written.txt") << "a test's file\n";
  ASSERT_TRUE(std::filesystem::exists(dir / "written.txt"));
  const std::filesystem::path other = std::filesystem::temp_directory_path() / "probe_std";
  std::filesystem::create_directories(other);
  std::ofstream(other / "written.txt") << "a test's file, found through TMPDIR\n";
  ASSERT_TRUE(std::filesystem::exists(other / "written.txt"));
  const char* fail = std::getenv("MIXLAB_PROBE_FAIL");
  EXPECT_FALSE(fail != nullptr && std::strcmp(fail, "1") == 0) << "failing on request (MIXLAB_PROBE_FAIL=1)";
}
