// The main() of every GoogleTest executable (in place of GTest::gtest_main): each test process
// writes its files into a private folder that it removes when every test passed.
//
// Why: the tests write checkpoints, corpora, token files, run folders and charts under
// ::testing::TempDir(), and none removed them; each `ctest` run left about 30 MB in /tmp (some
// names carry the pid, so they piled up: 495 MB after 16 runs, 2026-12-03), and two checkouts
// testing at once shared the fixed names. GoogleTest's TempDir() reads TEST_TMPDIR on every call
// and std::filesystem::temp_directory_path() reads TMPDIR, so setting both here moves every
// test's files, and those of the processes the tests start, into the private folder without
// touching the tests.
//
// The folder is `mixlab-test-XXXXXX` under the TempDir() the process started with (TEST_TMPDIR,
// else TMPDIR, else /tmp). It is kept, and its path printed, when a test failed (to look at what
// the test wrote) or when MIXLAB_KEEP_TEST_FILES is set to anything but 0.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace {

bool keep_requested() {
  const char* keep = std::getenv("MIXLAB_KEEP_TEST_FILES");
  return keep != nullptr && keep[0] != '\0' && std::strcmp(keep, "0") != 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string base = ::testing::TempDir();  // ends in '/'
  std::string pattern = base + "mixlab-test-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr) {
    std::fprintf(stderr, "test_main: cannot create a private folder for the tests' files under %s: %s\n", base.c_str(),
                 std::strerror(errno));
    return 1;
  }
  const std::string root = name.data();
  for (const char* variable : {"TEST_TMPDIR", "TMPDIR"}) {
    if (::setenv(variable, root.c_str(), 1) != 0) {
      std::fprintf(stderr, "test_main: cannot set %s to %s: %s\n", variable, root.c_str(), std::strerror(errno));
      return 1;
    }
  }
  const int result = RUN_ALL_TESTS();
  if (result != 0 || keep_requested()) {
    std::fprintf(stderr, "test_main: the tests' files are kept in %s\n", root.c_str());
    return result;
  }
  std::error_code error;
  std::filesystem::remove_all(root, error);
  if (error) {
    // The tests passed; a folder that cannot be removed is reported, not a failure of theirs.
    std::fprintf(stderr, "test_main: could not remove %s: %s\n", root.c_str(), error.message().c_str());
  }
  return result;
}
