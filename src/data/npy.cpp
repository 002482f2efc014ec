// NumPy .npy/.npz integer arrays (mixlab/data/npy.h). Format: numpy/lib/format.py's
// documentation ("NPY format"), versions 1.0-3.0.
#include "mixlab/data/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/data/zip_archive.h"

namespace mixlab {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

std::string printable(std::string_view b, size_t n) {
  std::string out;
  for (size_t i = 0; i < std::min(n, b.size()); ++i) out += fmt::format("{}{:02x}", i ? " " : "", (unsigned char)b[i]);
  return out.empty() ? "an empty file" : "bytes " + out;
}

// The header dict: a small recursive-descent parser of the Python literal subset NumPy writes
// (str keys; str, bool and tuple-of-int values).
struct HeaderValue {
  enum Kind { kString, kBool, kTuple } kind = kString;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view s, const std::string& origin) : s_(s), origin_(origin) {}

  std::vector<std::pair<std::string, HeaderValue>> dict() {
    std::vector<std::pair<std::string, HeaderValue>> out;
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      std::string key = string();
      expect(':');
      out.emplace_back(std::move(key), value());
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      break;
    }
    expect('}');
    skip();
    fail_unless(i_ == s_.size(), "text after the closing '}'");
    return out;
  }

 private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void fail_unless(bool ok, const std::string& what) const {
    MIXLAB_CHECK(ok, "{}: malformed .npy header ({} at character {}): '{}'", origin_, what, i_, shown_text(s_));
  }
  void expect(char c) {
    skip();
    fail_unless(peek() == c, fmt::format("expected '{}'", c));
    ++i_;
  }
  std::string string() {
    skip();
    const char q = peek();
    fail_unless(q == '\'' || q == '"', "expected a quoted string");
    const size_t end = s_.find(q, i_ + 1);
    fail_unless(end != std::string_view::npos, "unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  int64_t integer() {
    skip();
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      fail_unless(v <= (std::numeric_limits<int64_t>::max() - 9) / 10, "a dimension too large");
      v = v * 10 + (s_[i_++] - '0');
    }
    fail_unless(i_ > start, "expected a non-negative integer");
    if (peek() == 'L') ++i_;  // Python 2's long literal, in files written by old NumPy
    return v;
  }
  HeaderValue value() {
    skip();
    HeaderValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.text = string();
      return v;
    }
    if (s_.substr(i_, 4) == "True" || s_.substr(i_, 5) == "False") {
      v.kind = HeaderValue::kBool;
      v.flag = s_[i_] == 'T';
      i_ += v.flag ? 4 : 5;
      return v;
    }
    fail_unless(c == '(', "expected a string, True/False or a tuple (a structured dtype is not supported)");
    ++i_;
    v.kind = HeaderValue::kTuple;
    for (;;) {
      skip();
      if (peek() == ')') break;
      v.ints.push_back(integer());
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      break;
    }
    expect(')');
    return v;
  }

  std::string_view s_;
  const std::string& origin_;
  size_t i_ = 0;
};

struct Dtype {
  bool is_signed = true;
  int size = 8;
};

Dtype parse_dtype(const std::string& descr, const std::string& origin) {
  const std::string expected =
      "expected a little-endian integer type: int8, int16, int32, int64, uint8, uint16, uint32 or uint64";
  MIXLAB_CHECK(descr.size() >= 3, "{}: unsupported dtype '{}'; {}", origin, shown_text(descr), expected);
  const char order = descr[0], kind = descr[1];
  MIXLAB_CHECK(order != '>' || descr == ">i1" || descr == ">u1",
               "{}: dtype '{}' is big-endian; {} (e.g. a.astype('<i8'))", origin, shown_text(descr), expected);
  const char* names[] = {"float", "complex", "bool", "bytes", "str", "object", "datetime", "timedelta", "void"};
  const std::string kinds = "fcbSUOmMV";
  const size_t k = kinds.find(kind);
  MIXLAB_CHECK(k == std::string::npos, "{}: dtype '{}' ({}) is not supported; {}", origin, shown_text(descr), names[k],
               expected);
  MIXLAB_CHECK((order == '<' || order == '|' || order == '=' || order == '>') && (kind == 'i' || kind == 'u'),
               "{}: unsupported dtype '{}'; {}", origin, shown_text(descr), expected);
  Dtype d;
  d.is_signed = kind == 'i';
  const std::string size = descr.substr(2);
  MIXLAB_CHECK(size == "1" || size == "2" || size == "4" || size == "8", "{}: unsupported dtype '{}'; {}", origin,
               shown_text(descr), expected);
  d.size = size[0] - '0';
  return d;
}

// Little-endian element i of `size` bytes, widened.
int64_t element(const unsigned char* p, const Dtype& d, int64_t i, const std::string& origin) {
  uint64_t u = 0;
  const unsigned char* e = p + i * d.size;
  for (int k = d.size - 1; k >= 0; --k) u = (u << 8) | e[k];
  if (!d.is_signed) {
    MIXLAB_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "{}: element {} is {}, more than the int64 values mixlab reads", origin, i, u);
    return static_cast<int64_t>(u);
  }
  const int bits = 8 * d.size;
  if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~uint64_t{0} << bits;  // sign-extend
  int64_t v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace

std::string NpyArray::shape_string() const {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

NpyArray npy_parse(std::string_view b, const std::string& origin) {
  MIXLAB_CHECK(b.size() >= kMagicSize && std::memcmp(b.data(), kMagic, kMagicSize) == 0,
               "{}: not a NumPy .npy array (expected the magic \\x93NUMPY, found {})", origin, printable(b, 8));
  MIXLAB_CHECK(b.size() >= kMagicSize + 2, "{}: .npy file is truncated after its magic", origin);
  const int major = static_cast<unsigned char>(b[6]), minor = static_cast<unsigned char>(b[7]);
  MIXLAB_CHECK((major == 1 || major == 2 || major == 3) && minor == 0,
               "{}: .npy format version {}.{} is not supported (expected 1.0, 2.0 or 3.0)", origin, major, minor);
  const size_t len_bytes = major == 1 ? 2 : 4;
  MIXLAB_CHECK(b.size() >= 8 + len_bytes, "{}: .npy file is truncated in its header length", origin);
  uint64_t header_len = 0;
  for (size_t k = len_bytes; k-- > 0;) header_len = (header_len << 8) | static_cast<unsigned char>(b[8 + k]);
  const size_t start = 8 + len_bytes;
  MIXLAB_CHECK(header_len <= b.size() - start, "{}: .npy header of {} bytes is truncated (the file has {} after it)",
               origin, header_len, b.size() - start);
  const std::string_view header = b.substr(start, header_len);
  HeaderParser parser(header, origin);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  for (auto& [key, v] : parser.dict()) {
    if (key == "descr") {
      MIXLAB_CHECK(v.kind == HeaderValue::kString, "{}: .npy header key 'descr' must be a string", origin);
      descr = v.text;
    } else if (key == "fortran_order") {
      MIXLAB_CHECK(v.kind == HeaderValue::kBool, "{}: .npy header key 'fortran_order' must be True or False", origin);
      fortran = v.flag;
    } else if (key == "shape") {
      MIXLAB_CHECK(v.kind == HeaderValue::kTuple, "{}: .npy header key 'shape' must be a tuple", origin);
      shape = v.ints;
    } else {
      MIXLAB_FAIL("{}: .npy header has the unknown key '{}' (expected descr, fortran_order and shape)", origin,
                  shown_text(key));
    }
  }
  MIXLAB_CHECK(descr && fortran && shape, "{}: .npy header lacks the key '{}' (expected descr, fortran_order, shape)",
               origin,
               !descr     ? "descr"
               : !fortran ? "fortran_order"
                          : "shape");
  NpyArray a;
  a.dtype = *descr;
  a.shape = *shape;
  const Dtype d = parse_dtype(a.dtype, origin);
  MIXLAB_CHECK(!*fortran || a.shape.size() <= 1,
               "{}: array of shape {} is in Fortran (column-major) order; expected C order "
               "(np.ascontiguousarray(a) before saving)",
               origin, a.shape_string());
  const int64_t available = static_cast<int64_t>(b.size() - start - header_len);
  int64_t n = 1, need = 0;
  bool overflow = false;
  for (int64_t s : a.shape) overflow = overflow || __builtin_mul_overflow(n, s, &n);
  overflow = overflow || __builtin_mul_overflow(n, static_cast<int64_t>(d.size), &need);
  // A product past int64 is more bytes than any file holds: truncation, not a wrapped size.
  MIXLAB_CHECK(!overflow, "{}: .npy data is truncated: shape {} of {} needs more than the {} bytes present", origin,
               a.shape_string(), a.dtype, available);
  MIXLAB_CHECK(available >= need, "{}: .npy data is truncated: shape {} of {} needs {} bytes, found {}", origin,
               a.shape_string(), a.dtype, need, available);
  MIXLAB_CHECK(available == need, "{}: .npy file has {} bytes after the data of shape {} of {} ({} bytes)", origin,
               available - need, a.shape_string(), a.dtype, need);
  const auto* p = reinterpret_cast<const unsigned char*>(b.data() + start + header_len);
  a.values.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) a.values[static_cast<size_t>(i)] = element(p, d, i, origin);
  return a;
}

NpyFile NpyFile::read(const std::string& path) {
  return from_bytes(file_read(path, kNpyMaxFileBytes, "NumPy file"), path);
}

NpyFile NpyFile::from_bytes(std::string bytes, const std::string& origin) {
  NpyFile f;
  f.origin_ = origin;
  if (bytes.size() >= kMagicSize && std::memcmp(bytes.data(), kMagic, kMagicSize) == 0) {
    f.entries_.emplace_back("", std::move(bytes));
    return f;
  }
  MIXLAB_CHECK(zip_is_archive(bytes),
               "{}: not a NumPy .npy or .npz file (expected the magic \\x93NUMPY or a zip archive's PK\\x03\\x04, "
               "found {})",
               origin, printable(bytes, 8));
  f.npz_ = true;
  for (auto& e : zip_read_entries(bytes, origin)) {
    const std::string suffix = ".npy";
    if (e.name.size() <= suffix.size() || e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    f.entries_.emplace_back(e.name.substr(0, e.name.size() - suffix.size()), std::move(e.bytes));
  }
  return f;
}

std::vector<std::string> NpyFile::names() const {
  std::vector<std::string> out;
  if (npz_)
    for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

bool NpyFile::contains(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.first == name) return true;
  return false;
}

NpyArray NpyFile::array(const std::string& name) const {
  if (!npz_) {
    MIXLAB_CHECK(name.empty(), "{}: is an .npy file (one array), not an .npz archive with an array '{}'", origin_,
                 shown_text(name));
    return npy_parse(entries_.front().second, origin_);
  }
  for (const auto& e : entries_)
    if (e.first == name) return npy_parse(e.second, fmt::format("{}: array '{}'", origin_, shown_text(name)));
  std::vector<std::string> have;
  for (const std::string& n : names()) have.push_back(shown_text(n));
  MIXLAB_FAIL("{}: .npz has no array '{}' (it has: {})", origin_, shown_text(name),
              have.empty() ? std::string("no arrays") : fmt::format("{}", fmt::join(have, ", ")));
}

}  // namespace mixlab
