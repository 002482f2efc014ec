// tests/support/npy_bytes.h — .npy and .npz files built byte by byte in a test, without NumPy:
// the reader's tests (tests/data/npy_test.cpp), the file task's (tests/train/task_file_test.cpp)
// and the CLI's (tests/cli/task_file_cli_test.cpp) write their inputs with these.
//
// npy_bytes writes NumPy's layout (magic, version, header length, a dict header padded with
// spaces to a multiple of 64 bytes and ended by '\n', the raw elements); zip_bytes writes a zip
// archive the way Python's zipfile does for np.savez (stored) and np.savez_compressed (raw
// deflate), optionally with NumPy's zip64 local headers (force_zip64: sizes 0xFFFFFFFF in the
// local header, the real ones in a zip64 extra field).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace mixlab_test {

/// Little-endian bytes of `values` as T (e.g. le_bytes<int16_t>({1, -2})).
template <typename T>
std::string le_bytes(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) {
    const T x = static_cast<T>(v);
    char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));  // the test machines are little-endian, like mixlab's
    out.append(b, sizeof(T));
  }
  return out;
}

/// A whole .npy file: `shape` as the header writes it, e.g. "(2, 3)", "(5,)", "()".
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data, int major = 1,
                             const std::string& fortran = "False") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  const size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  out += le_bytes<uint32_t>({n}).substr(0, major == 1 ? 2 : 4);
  return out + header + data;
}

/// An int64 (N,T) array as a .npy.
inline std::string npy_i64(int64_t rows, int64_t cols, const std::vector<int64_t>& values) {
  return npy_bytes("<i8", "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")", le_bytes<int64_t>(values));
}

struct ZipFileEntry {
  std::string name;
  std::string bytes;
  bool deflate = false;
};

inline std::string raw_deflate(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

/// A zip archive of `entries`; `zip64` writes NumPy's zip64 local headers.
inline std::string zip_bytes(const std::vector<ZipFileEntry>& entries, bool zip64 = false) {
  auto u16 = [](uint64_t v) { return le_bytes<uint16_t>({static_cast<int64_t>(v)}); };
  auto u32 = [](uint64_t v) { return le_bytes<uint32_t>({static_cast<int64_t>(v)}); };
  auto u64 = [](uint64_t v) { return le_bytes<uint64_t>({static_cast<int64_t>(v)}); };
  std::string out, central;
  for (const auto& e : entries) {
    const std::string data = e.deflate ? raw_deflate(e.bytes) : e.bytes;
    const uint32_t crc = static_cast<uint32_t>(
        crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(e.bytes.data()), static_cast<uInt>(e.bytes.size())));
    const std::string extra = zip64 ? u16(1) + u16(16) + u64(e.bytes.size()) + u64(data.size()) : "";
    const uint64_t offset = out.size();
    const uint16_t method = e.deflate ? 8 : 0;
    out += u32(0x04034b50) + u16(zip64 ? 45 : 20) + u16(0) + u16(method) + u16(0) + u16(0) + u32(crc) +
           u32(zip64 ? 0xFFFFFFFF : data.size()) + u32(zip64 ? 0xFFFFFFFF : e.bytes.size()) + u16(e.name.size()) +
           u16(extra.size()) + e.name + extra + data;
    central += u32(0x02014b50) + u16(45) + u16(20) + u16(0) + u16(method) + u16(0) + u16(0) + u32(crc) +
               u32(data.size()) + u32(e.bytes.size()) + u16(e.name.size()) + u16(0) + u16(0) + u16(0) + u16(0) +
               u32(0) + u32(offset) + e.name;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  out += u32(0x06054b50) + u16(0) + u16(0) + u16(entries.size()) + u16(entries.size()) + u32(central.size()) +
         u32(cd_offset) + u16(0);
  return out;
}

/// An .npz of int64 `inputs` and `labels`, both (N,T).
inline std::string npz_inputs_labels(int64_t rows, int64_t cols, const std::vector<int64_t>& inputs,
                                     const std::vector<int64_t>& labels, bool deflate = false) {
  return zip_bytes(
      {{"inputs.npy", npy_i64(rows, cols, inputs), deflate}, {"labels.npy", npy_i64(rows, cols, labels), deflate}},
      /*zip64=*/true);
}

}  // namespace mixlab_test
