// MappedFile against the bytes written: the mapping reads them back, an empty file maps to no
// bytes, and a missing or non-regular path is an error that starts with the caller's `what` (which
// callers make name the file) and says why.
#include "mixlab/data/mapped_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "mixlab/core/error.h"

namespace mixlab {
namespace mapped_file_test {
namespace {

TEST(MappedFile, MapsTheFileBytes) {
  const auto dir = std::filesystem::temp_directory_path() / "mixlab_mapped_file_test";
  std::filesystem::create_directories(dir);
  const std::string bytes("ab\0cd", 5);
  std::ofstream(dir / "five.bin", std::ios::binary) << bytes;
  const auto map = MappedFile::open((dir / "five.bin").string(), "test file");
  ASSERT_EQ(map->size(), 5u);
  EXPECT_EQ(std::string(map->data(), map->size()), bytes);
  std::ofstream(dir / "empty.bin", std::ios::binary).flush();
  EXPECT_EQ(MappedFile::open((dir / "empty.bin").string(), "test file")->size(), 0u);
  for (const std::string path : {(dir / "missing.bin").string(), dir.string(), std::string("/dev/zero")}) {
    try {
      MappedFile::open(path, "test file '" + path + "'");
      ADD_FAILURE() << "expected an error for " << path;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("test file '" + path + "'"), std::string::npos) << m;
      EXPECT_TRUE(m.find("cannot open") != std::string::npos || m.find("not a regular file") != std::string::npos) << m;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mapped_file_test
}  // namespace mixlab
