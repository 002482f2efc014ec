// Issue 16 building blocks: the strict number parser, atomic durable writes, bounded reads,
// the run-dir lock and the checkpoint checksum.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/checksum.h"
#include "mixlab/core/dir_lock.h"
#include "mixlab/core/error.h"
#include "mixlab/core/parse_number.h"
#include "mixlab/core/threads.h"

namespace mixlab {
namespace reliability_test {
namespace {

namespace fs = std::filesystem;

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("mixlab_core_rel_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

TEST(ParseNumber, AcceptsExactlyTheRange) {
  EXPECT_EQ(parse_int("42", "--x", 1, 100), 42);
  EXPECT_EQ(parse_int("-5", "--x", -10, 10), -5);
  EXPECT_EQ(parse_positive_int("9223372036854775807", "--x"), INT64_MAX);
  EXPECT_EQ(parse_uint64("18446744073709551615", "--seed"), UINT64_MAX);
  EXPECT_EQ(parse_double("1e-3", "lr", 0, 1), 1e-3);
}

TEST(ParseNumber, RejectsAndNamesTheArgument) {
  // Out of range is an error, never a clamp (issue 16 item 8), and the message stays short.
  const std::string huge = error_of([] { parse_positive_int("99999999999999999999", "--steps"); });
  EXPECT_NE(huge.find("--steps"), std::string::npos) << huge;
  EXPECT_NE(huge.find("99999999999999999999"), std::string::npos) << huge;
  EXPECT_LT(huge.size(), 200u) << huge;
  for (const char* bad : {"", "0", "-1", "+3", " 3", "3 ", "3x", "0x10", "1e3", "1.0"}) {
    EXPECT_NE(error_of([&] { parse_positive_int(bad, "--n"); }).find("--n must be a positive integer"),
              std::string::npos)
        << "'" << bad << "'";
  }
  EXPECT_NE(error_of([] { parse_int("11", "--t", 1, 10); }).find("[1, 10]"), std::string::npos);
  EXPECT_NE(error_of([] { parse_uint64("18446744073709551616", "--seed"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { parse_uint64("-1", "--seed"); }).find("--seed"), std::string::npos);
  for (const char* bad : {"nan", "inf", "1e400", "0x1p3", " 1", ""}) {
    EXPECT_NE(error_of([&] { parse_double(bad, "lr"); }).find("lr must be a number"), std::string::npos) << bad;
  }
}

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporary) {
  const std::string dir = temp_dir("atomic");
  const std::string path = dir + "/a.txt";
  atomic_write_file(path, "first\n");
  atomic_write_file(path, "second\n");
  EXPECT_EQ(file_read(path, 100, "test"), "second\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFile, ErrorsNameThePath) {
  const std::string path = "/nonexistent-dir-mixlab/x.json";
  const std::string m = error_of([&] { atomic_write_file(path, "x"); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_THROW(atomic_write_file(path, "x"), IoError);
  EXPECT_THROW(AppendFile(path, true), IoError);
  EXPECT_NE(error_of([] { file_read("/dev/zero", 1000, "config"); }).find("/dev/zero: not a regular file"),
            std::string::npos);
  // A regular file over the limit is refused by its size; a pipe is read up to the limit.
  const std::string big = temp_dir("big") + "/big.json";
  atomic_write_file(big, std::string(1001, 'x'));
  EXPECT_NE(error_of([&] { file_read(big, 1000, "config"); }).find("larger than the limit of 1000 bytes (1001 bytes)"),
            std::string::npos);
  EXPECT_EQ(file_read(big, 1001, "config").size(), 1001u);
  EXPECT_THROW(file_read("/nonexistent-mixlab", 10, "config"), IoError);
}

TEST(AtomicFile, AppendFileAppendsLines) {
  const std::string path = temp_dir("append") + "/m.jsonl";
  {
    AppendFile f(path, true);
    f.append_line("a");
    f.append_line("b");
  }
  {
    AppendFile f(path, false);
    f.append_line("c");
  }
  EXPECT_EQ(file_read(path, 100, "test"), "a\nb\nc\n");
  { AppendFile f(path, true); }
  EXPECT_EQ(file_read(path, 100, "test"), "");
}

// A write killed mid-way leaves "<name>.tmp.<pid>.<n>"; the lock holder removes exactly those.
TEST(AtomicFile, StaleTemporariesAreRemovedAndNothingElse) {
  const std::string dir = temp_dir("stale");
  for (const char* name : {"checkpoint.pt.tmp.123.0", "config.json.tmp.9.17", "keep.tmp.x.1", "keep.tmp.1.", ".tmp.1.2",
                           "checkpoint.pt", "metrics.jsonl", "notes.tmp"}) {
    std::ofstream(fs::path(dir) / name) << "x";
  }
  fs::create_directories(fs::path(dir) / "sub.tmp.1.2");  // a folder, not a temporary file
  EXPECT_EQ(remove_stale_temp_files(dir), 2);
  for (const char* kept :
       {"keep.tmp.x.1", "keep.tmp.1.", ".tmp.1.2", "checkpoint.pt", "metrics.jsonl", "notes.tmp", "sub.tmp.1.2"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / kept)) << kept;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "checkpoint.pt.tmp.123.0"));
  EXPECT_EQ(remove_stale_temp_files(dir), 0);
  EXPECT_NE(error_of([&] { remove_stale_temp_files(dir + "/missing"); }).find("missing"), std::string::npos);
}

TEST(DirLock, SecondHolderIsRefusedWithThePid) {
  const std::string dir = temp_dir("lock");
  {
    DirLock a(dir, "run directory");
    const std::string m = error_of([&] { DirLock b(dir, "run directory"); });
    EXPECT_NE(m.find("in use by pid " + std::to_string(::getpid())), std::string::npos) << m;
    EXPECT_THROW(DirLock(dir, "run directory"), IoError);
  }
  EXPECT_NO_THROW(DirLock(dir, "run directory"));  // released with the first holder
}

TEST(Checksum, DetectsEverySingleBitFlip) {
  std::string s(300, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7);
  const uint64_t h = checksum64(s);
  EXPECT_EQ(checksum64(s.substr(0, 100), checksum64("")) == checksum64(s.substr(0, 100)), true);
  EXPECT_EQ(checksum64(s.substr(100), checksum64(s.substr(0, 100))), h);  // streaming
  for (size_t i = 0; i < s.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string t = s;
      t[i] = static_cast<char>(t[i] ^ (1 << b));
      ASSERT_NE(checksum64(t), h) << i << ":" << b;
    }
  }
}

TEST(Threads, CountIsBounded) {
  EXPECT_GE(threads_max(), 4);
  EXPECT_THROW(threads_configure(threads_max() + 1), Error);
  EXPECT_THROW(threads_configure(-1), Error);
  EXPECT_EQ(threads_configure(1), 1);
}

TEST(ErrorMacros, FailThrowsError) {
  EXPECT_NE(error_of([] { MIXLAB_FAIL("bad {}", 3); }).find("bad 3"), std::string::npos);
}

}  // namespace
}  // namespace reliability_test
}  // namespace mixlab
