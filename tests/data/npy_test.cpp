// NumPy .npy/.npz reading (mixlab/data/npy.h, mixlab/data/zip_archive.h): every element type and
// format version, stored, deflated and zip64 archives, and each bad input refused by message.
// The files are built byte by byte (tests/support/npy_bytes.h); tests/python/test_zoology_mqar.py
// reads files NumPy itself wrote.
#include "mixlab/data/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <limits>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/error.h"
#include "mixlab/data/zip_archive.h"
#include "mixlab_test_paths.h"
#include "support/expect_error.h"
#include "support/npy_bytes.h"

namespace npy_test {

using namespace mixlab;
using namespace mixlab_test;

namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::path(::testing::TempDir()) / "mixlab_npy_test";
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  atomic_write_file(path, bytes);
  return path;
}

NpyArray parse(const std::string& bytes) { return npy_parse(bytes, "t.npy"); }

}  // namespace

TEST(Npy, EveryIntegerTypeWidensToInt64) {
  const std::vector<int64_t> s8 = {-128, -1, 0, 127}, u8 = {0, 1, 200, 255};
  EXPECT_EQ(parse(npy_bytes("|i1", "(4,)", le_bytes<int8_t>(s8))).values, s8);
  EXPECT_EQ(parse(npy_bytes("|u1", "(4,)", le_bytes<uint8_t>(u8))).values, u8);
  const std::vector<int64_t> s16 = {-32768, -100, 7, 32767}, u16 = {0, 65535, 256, 9};
  EXPECT_EQ(parse(npy_bytes("<i2", "(4,)", le_bytes<int16_t>(s16))).values, s16);
  EXPECT_EQ(parse(npy_bytes("<u2", "(4,)", le_bytes<uint16_t>(u16))).values, u16);
  const std::vector<int64_t> s32 = {std::numeric_limits<int32_t>::min(), -100, 0, std::numeric_limits<int32_t>::max()};
  const std::vector<int64_t> u32 = {0, 4294967295LL, 65536, 3};
  EXPECT_EQ(parse(npy_bytes("<i4", "(4,)", le_bytes<int32_t>(s32))).values, s32);
  EXPECT_EQ(parse(npy_bytes("<u4", "(4,)", le_bytes<uint32_t>(u32))).values, u32);
  const std::vector<int64_t> s64 = {std::numeric_limits<int64_t>::min(), -100, 0, std::numeric_limits<int64_t>::max()};
  EXPECT_EQ(parse(npy_bytes("<i8", "(4,)", le_bytes<int64_t>(s64))).values, s64);
  const std::vector<int64_t> u64 = {0, 1, std::numeric_limits<int64_t>::max()};
  EXPECT_EQ(parse(npy_bytes("<u8", "(3,)", le_bytes<uint64_t>(u64))).values, u64);
  EXPECT_EQ(parse(npy_bytes("=i4", "(1,)", le_bytes<int32_t>({5}))).values, std::vector<int64_t>{5});
}

TEST(Npy, VersionsShapesAndOrder) {
  const std::vector<int64_t> v = {1, 2, 3, 4, 5, 6};
  for (int major : {1, 2, 3}) {
    const NpyArray a = parse(npy_bytes("<i8", "(2, 3)", le_bytes<int64_t>(v), major));
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3})) << major;
    EXPECT_EQ(a.values, v) << major;  // C order: row 0 is 1 2 3
    EXPECT_EQ(a.dtype, "<i8");
    EXPECT_EQ(a.shape_string(), "(2, 3)");
  }
  EXPECT_EQ(parse(npy_bytes("<i8", "()", le_bytes<int64_t>({9}))).shape, std::vector<int64_t>{});
  EXPECT_EQ(parse(npy_bytes("<i8", "(3,)", le_bytes<int64_t>({1, 2, 3}))).shape_string(), "(3,)");
  EXPECT_EQ(parse(npy_bytes("<i8", "(0, 4)", "")).numel(), 0);
  EXPECT_EQ(parse(npy_bytes("<i8", "(2L, 1L)", le_bytes<int64_t>({1, 2}))).shape, (std::vector<int64_t>{2, 1}));
  // fortran_order is irrelevant for one dimension (NumPy writes True for some 1-D views).
  EXPECT_EQ(parse(npy_bytes("<i8", "(2,)", le_bytes<int64_t>({1, 2}), 1, "True")).values, (std::vector<int64_t>{1, 2}));
}

TEST(Npy, NpzStoredDeflatedAndZip64) {
  const std::string a = npy_i64(2, 2, {1, 2, 3, 4}), b = npy_bytes("<u1", "(3,)", le_bytes<uint8_t>({7, 8, 9}));
  for (bool deflate : {false, true}) {
    for (bool zip64 : {false, true}) {
      const NpyFile f = NpyFile::from_bytes(
          zip_bytes({{"a.npy", a, deflate}, {"b.npy", b, deflate}, {"note.txt", "x", deflate}}, zip64), "t.npz");
      EXPECT_TRUE(f.is_npz());
      EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));  // non-.npy entries are not arrays
      EXPECT_TRUE(f.contains("b"));
      EXPECT_FALSE(f.contains("note"));
      EXPECT_EQ(f.array("a").values, (std::vector<int64_t>{1, 2, 3, 4}));
      EXPECT_EQ(f.array("b").values, (std::vector<int64_t>{7, 8, 9}));
    }
  }
  // An entry of another type beside them is only refused when asked for.
  const NpyFile g =
      NpyFile::from_bytes(zip_bytes({{"x.npy", a}, {"f.npy", npy_bytes("<f4", "(1,)", "abcd")}}), "g.npz");
  EXPECT_EQ(g.array("x").numel(), 4);
  expect_error([&] { g.array("f"); }, {"g.npz: array 'f'", "'<f4'", "float"});
  expect_error([&] { g.array("labels"); }, {"g.npz", "no array 'labels'", "x, f"});
  // An empty archive (np.savez with no array) reads as no arrays.
  EXPECT_TRUE(NpyFile::from_bytes(zip_bytes({}), "e.npz").names().empty());
}

TEST(Npy, ReadsFilesAndDecidesByContent) {
  const std::string npy = temp_file("a.npz", npy_i64(1, 2, {5, 6}));  // an .npy despite its name
  const NpyFile f = NpyFile::read(npy);
  EXPECT_FALSE(f.is_npz());
  EXPECT_EQ(f.array().values, (std::vector<int64_t>{5, 6}));
  expect_error([&] { f.array("inputs"); }, {"a.npz", "is an .npy file"});
  const std::string npz = temp_file("b.npy", zip_bytes({{"inputs.npy", npy_i64(1, 1, {3}), true}}, true));
  EXPECT_EQ(NpyFile::read(npz).array("inputs").values, std::vector<int64_t>{3});
}

TEST(Npy, BadFilesAreOneLineErrorsNamingTheFile) {
  // Missing file: an IoError (exit code 3) with the system's reason.
  try {
    NpyFile::read("/nonexistent/mixlab/data.npz");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mixlab/data.npz"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  expect_error([] { NpyFile::from_bytes("hello world", "h.txt"); },
               {"h.txt", "not a NumPy .npy or .npz file", "\\x93NUMPY", "68 65 6c 6c"});
  expect_error([] { NpyFile::from_bytes("", "empty.npy"); }, {"empty.npy", "an empty file"});
  expect_error([] { parse("PK\x03\x04"); }, {"t.npy", "not a NumPy .npy array"});
  const std::string ok = npy_i64(1, 2, {1, 2});
  std::string v4 = ok;
  v4[6] = 4;
  expect_error([&] { parse(v4); }, {"t.npy", "version 4.0", "expected 1.0, 2.0 or 3.0"});
  const std::string expected = "expected a little-endian integer type";
  expect_error([] { parse(npy_bytes("<f4", "(1,)", "abcd")); }, {"t.npy", "'<f4'", "float", expected});
  expect_error([] { parse(npy_bytes("<f8", "(1,)", "abcdefgh")); }, {"'<f8'", "float"});
  expect_error([] { parse(npy_bytes(">i4", "(1,)", "abcd")); }, {"t.npy", "'>i4'", "big-endian", expected});
  expect_error([] { parse(npy_bytes("|b1", "(1,)", "a")); }, {"'|b1'", "bool"});
  expect_error([] { parse(npy_bytes("<i3", "(1,)", "abc")); }, {"'<i3'", expected});
  expect_error(
      [] {
        parse(npy_bytes("<i8", "(2, 2)", le_bytes<int64_t>({1, 2, 3, 4}), 1, "True"));
      },
      {"t.npy", "Fortran", "(2, 2)", "expected C order"});
  expect_error(
      [] {
        parse(npy_bytes("<i8", "(2, 2)", le_bytes<int64_t>({1, 2, 3})));
      },
      {"t.npy", "truncated", "(2, 2)", "needs 32 bytes, found 24"});
  expect_error(
      [] {
        parse(npy_bytes("<i8", "(1, 2)", le_bytes<int64_t>({1, 2, 3})));
      },
      {"t.npy", "8 bytes after the data"});
  expect_error([] { parse(npy_bytes("<i8", "(4611686018427387904, 4)", "")); }, {"t.npy", "truncated"});
  expect_error([] { parse(npy_bytes("<u8", "(1,)", le_bytes<uint64_t>({-1}))); }, {"t.npy", "18446744073709551615"});
  // Header problems.
  std::string structured = npy_i64(1, 1, {1});
  const auto at = structured.find("'<i8'");
  structured.replace(at, 5, "[('a', '<i8')]");
  expect_error([&] { parse(structured); }, {"t.npy", "malformed .npy header"});
  std::string nokey = npy_i64(1, 1, {1});
  nokey.replace(nokey.find("'shape'"), 7, "'shapo'");
  expect_error([&] { parse(nokey); }, {"t.npy", "unknown key 'shapo'"});
  std::string cut = ok.substr(0, 20);
  expect_error([&] { parse(cut); }, {"t.npy", "header", "truncated"});
}

TEST(Npy, BadArchivesAreErrorsNamingTheEntry) {
  const std::string a = npy_i64(1, 2, {1, 2});
  std::string corrupt = zip_bytes({{"inputs.npy", a}});
  corrupt[30 + 10 + 70] ^= 0x5A;  // a byte of the stored data
  expect_error([&] { NpyFile::from_bytes(corrupt, "c.npz"); }, {"c.npz", "zip entry 'inputs.npy'", "CRC-32 mismatch"});
  std::string deflated = zip_bytes({{"inputs.npy", a, true}});
  deflated[30 + 10 + 3] ^= 0x5A;
  expect_error([&] { NpyFile::from_bytes(deflated, "d.npz"); }, {"d.npz", "zip entry 'inputs.npy'"});
  const std::string whole = zip_bytes({{"inputs.npy", a}});
  expect_error([&] { NpyFile::from_bytes(whole.substr(0, whole.size() - 30), "t.npz"); },
               {"t.npz", "no end of central directory record"});
  std::string method = whole;
  const size_t central = whole.find("PK\x01\x02");
  method[central + 10] = 12;  // bzip2
  method[8] = 12;
  expect_error([&] { NpyFile::from_bytes(method, "m.npz"); }, {"m.npz", "compression method 12", "expected 0 stored"});
  std::string encrypted = whole;
  encrypted[central + 8] = 1;
  expect_error([&] { NpyFile::from_bytes(encrypted, "e.npz"); }, {"e.npz", "encrypted"});
  std::string bad_offset = whole;
  bad_offset[central + 42] = 0x7F;  // the local header offset points past the file
  expect_error([&] { NpyFile::from_bytes(bad_offset, "o.npz"); }, {"o.npz", "zip entry 'inputs.npy'"});
}

// Found by the npy fuzzer (tests/fuzz/corpus/npy/crash-malformed-header-quoted-with-its-newline.npy):
// a malformed header was quoted whole, with the '\n' that ends every .npy header, so the message
// took two lines. Text from the file (the header, a dtype, a key, an entry name) is now quoted
// with control bytes escaped (core/shown_text.h).
TEST(Npy, MessagesQuotingTheFileStayOnOneLine) {
  auto expect_one_line = [](const std::function<void()>& f, const std::string& fragment) {
    try {
      f();
      ADD_FAILURE() << "expected a mixlab::Error containing '" << fragment << "'";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_NE(m.find(fragment), std::string::npos) << m;
    }
  };
  std::string malformed = npy_i64(1, 1, {1});
  malformed.replace(malformed.find("'shape': "), 9, "'shape' )");
  expect_one_line([&] { parse(malformed); }, "malformed .npy header (expected ':' at character");
  expect_one_line([&] { parse(malformed); }, "\\x0a'");  // the header's final newline, escaped
  const std::string long_header = npy_bytes("<i8", "(1, 1" + std::string(200, ' ') + "\nx", "");
  expect_one_line([&] { parse(long_header); }, "...'");  // a header of 300 bytes, quoted up to 120
  std::string key = npy_i64(1, 1, {1});
  key.replace(key.find("'shape'"), 7, "'sh\nape'");
  expect_one_line([&] { parse(key); }, "unknown key 'sh\\x0aape'");
  expect_one_line([] { parse(npy_bytes("<i\n", "(1,)", "")); }, "unsupported dtype '<i\\x0a'");
  const std::string npz = zip_bytes({{"in\nputs.npy", npy_i64(1, 1, {1})}});
  expect_one_line([&] { (void)NpyFile::from_bytes(npz, "n.npz").array("labels"); }, "(it has: in\\x0aputs)");
}

// Found by the npy fuzzer (tests/fuzz/corpus/npy/oom-deflate-size-claim.npz): a 367-byte .npz whose
// directory says a deflated entry inflates to 4 GB was given that much memory before inflating.
// A size deflate cannot reach from the compressed bytes (1032:1) is now refused first.
TEST(Npy, AnInflatedSizeDeflateCannotReachIsRefusedBeforeAllocating) {
  expect_error([] { NpyFile::read(MIXLAB_SOURCE_DIR "/tests/fuzz/corpus/npy/oom-deflate-size-claim.npz"); },
               {"oom-deflate-size-claim.npz", "4177526640 bytes inflated from 76 compressed",
                "more than deflate can produce (1032:1)"});
  // At the bound itself an entry is still read: 1032 zeros deflate to a few bytes.
  const std::string zeros = npy_bytes("|u1", "(1032,)", std::string(1032, '\0'));
  EXPECT_EQ(NpyFile::from_bytes(zip_bytes({{"a.npy", zeros, true}}), "z.npz").array("a").numel(), 1032);
}

}  // namespace npy_test
