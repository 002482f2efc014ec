// mixlab/data/npy.h — integer arrays from NumPy's .npy and .npz files, so that data written by
// any program (np.save, np.savez, np.savez_compressed) can be read without Python.
//
// .npy (NumPy's format, versions 1.0, 2.0 and 3.0): the magic "\x93NUMPY", a version byte pair,
// the header length (u16 little-endian in 1.0, u32 in 2.0 and 3.0), a header that is a Python
// dict literal {'descr': '<i8', 'fortran_order': False, 'shape': (N, T), } (ASCII, UTF-8 in
// 3.0), then the raw elements. The data must be exactly prod(shape) * itemsize bytes.
// .npz: a zip archive (mixlab/data/zip_archive.h: stored or deflated entries) of .npy files;
// array "x" is the entry "x.npy", as np.load names them. An entry is parsed when asked for, so
// an archive may hold arrays of other types beside the ones read.
// Which of the two a file is comes from its first bytes, not its name.
//
// Element types: int8/16/32/64 and uint8/16/32/64, little-endian ('<' or '|', and '=' since
// mixlab runs on little-endian machines only), C order. Every element is widened to int64
// (uint64 values above INT64_MAX are refused). The file is read once, whole.
//
// Every problem is a mixlab::Error (a file that cannot be opened: mixlab::IoError), one line
// naming the file (and array) with what was expected and what was found: bad magic, an unknown
// version, a malformed header, an unsupported dtype (float, bool, big-endian, structured),
// Fortran order, truncated data or bytes after the data, a missing array in an .npz.
//
// Not supported: floating-point, complex, bool, string and object (pickled) arrays; big-endian
// data; Fortran order; memory mapping (the values are copied into int64).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mixlab {

/// The largest .npy/.npz file read (64 GiB): a larger one is refused before it is read.
constexpr int64_t kNpyMaxFileBytes = int64_t{1} << 36;

struct NpyArray {
  std::string dtype;            // the header's descr as written, e.g. "<i8", "|u1"
  std::vector<int64_t> shape;   // C order; () for a scalar
  std::vector<int64_t> values;  // every element widened to int64, C order
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  /// "(4, 8)" as NumPy prints shapes, for messages.
  std::string shape_string() const;
};

/// Parses the bytes of one .npy file; `origin` names it in messages.
NpyArray npy_parse(std::string_view bytes, const std::string& origin);

/// A .npy or .npz file, read once.
class NpyFile {
 public:
  /// Reads `path` and decides from its first bytes whether it is an .npy or an .npz.
  static NpyFile read(const std::string& path);
  /// The same from bytes in memory (`origin` names them in messages).
  static NpyFile from_bytes(std::string bytes, const std::string& origin);

  bool is_npz() const { return npz_; }
  const std::string& origin() const { return origin_; }
  /// .npz: the array names (entries "x.npy" -> "x"; other entries are not listed), in archive
  /// order. .npy: empty.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// .npy: the one array (`name` must be empty). .npz: the array `name`; a missing one is an
  /// Error listing the names the archive has.
  NpyArray array(const std::string& name = "") const;

 private:
  std::string origin_;
  bool npz_ = false;
  std::vector<std::pair<std::string, std::string>> entries_;  // (array name, .npy bytes)
};

}  // namespace mixlab
