// Zip archives in memory: central directory, zip64 records, stored and deflated entries
// (mixlab/data/zip_archive.h). Field layouts: PKWARE's APPNOTE.TXT, sections 4.3 and 4.5.
#include "mixlab/data/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"

namespace mixlab {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr int64_t kDeflateMaxRatio = 1032;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr int64_t kEndSize = 22;            // end of central directory record without its comment
constexpr int64_t kZip64LocatorSize = 20;   // zip64 end of central directory locator
constexpr int64_t kCentralHeaderSize = 46;  // central directory file header without name/extra/comment
constexpr int64_t kLocalHeaderSize = 30;    // local file header without name/extra
constexpr uint16_t kStored = 0, kDeflated = 8;

// Little-endian reads at a checked offset: every field read goes through `at`, so a truncated
// or lying archive is an Error naming the record, never a read past the buffer.
struct Reader {
  std::string_view b;
  const std::string& origin;
  void need(int64_t off, int64_t n, const char* what) const {
    MIXLAB_CHECK(off >= 0 && n >= 0 && off <= static_cast<int64_t>(b.size()) - n,
                 "{}: zip archive is truncated: {} needs bytes [{}, {}) of a {}-byte file", origin, what, off, off + n,
                 b.size());
  }
  uint64_t le(int64_t off, int n, const char* what) const {
    need(off, n, what);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(off + i)]);
    return v;
  }
  uint16_t u16(int64_t off, const char* what) const { return static_cast<uint16_t>(le(off, 2, what)); }
  uint32_t u32(int64_t off, const char* what) const { return static_cast<uint32_t>(le(off, 4, what)); }
  int64_t u64(int64_t off, const char* what) const {
    const uint64_t v = le(off, 8, what);
    MIXLAB_CHECK(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "{}: zip archive has an impossible {} ({})", origin, what, v);
    return static_cast<int64_t>(v);
  }
};

struct Directory {
  int64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const Reader& r) {
  const int64_t n = static_cast<int64_t>(r.b.size());
  // The end record sits at the end, before a comment of at most 65535 bytes.
  int64_t end = -1;
  for (int64_t off = n - kEndSize; off >= 0 && off >= n - kEndSize - 65535; --off) {
    if (r.u32(off, "end record") == kEndSig) {
      end = off;
      break;
    }
  }
  MIXLAB_CHECK(end >= 0, "{}: not a readable zip archive: no end of central directory record (truncated file?)",
               r.origin);
  MIXLAB_CHECK(r.u16(end + 4, "disk number") == 0 && r.u16(end + 6, "directory disk") == 0,
               "{}: multi-disk zip archives are not supported", r.origin);
  Directory d;
  d.entries = r.u16(end + 10, "entry count");
  d.size = r.u32(end + 12, "directory size");
  d.offset = r.u32(end + 16, "directory offset");
  if (d.entries == 0xFFFF || d.size == 0xFFFFFFFF || d.offset == 0xFFFFFFFF) {
    const int64_t loc = end - kZip64LocatorSize;
    MIXLAB_CHECK(loc >= 0 && r.u32(loc, "zip64 locator") == kZip64LocatorSig,
                 "{}: zip archive's end record asks for zip64 but has no zip64 locator before it", r.origin);
    const int64_t z = r.u64(loc + 8, "zip64 end record offset");
    MIXLAB_CHECK(r.u32(z, "zip64 end record") == kZip64EndSig,
                 "{}: zip archive's zip64 end record is missing at offset {}", r.origin, z);
    d.entries = r.u64(z + 32, "zip64 entry count");
    d.size = r.u64(z + 40, "zip64 directory size");
    d.offset = r.u64(z + 48, "zip64 directory offset");
  }
  r.need(d.offset, d.size, "the central directory");
  return d;
}

// Inflates raw deflate data (no zlib/gzip wrapper, as zip stores it) into exactly `size` bytes.
std::string inflate_entry(std::string_view in, int64_t size, const std::string& what) {
  std::string out(static_cast<size_t>(size), '\0');
  z_stream z{};
  MIXLAB_CHECK(inflateInit2(&z, -MAX_WBITS) == Z_OK, "{}: zlib could not start inflating", what);
  // zlib counts in 32-bit uInt: feed and drain in chunks so entries over 4 GiB work.
  constexpr int64_t kChunk = int64_t{1} << 30;
  const int64_t in_size = static_cast<int64_t>(in.size());
  int64_t in_pos = 0, out_pos = 0;
  unsigned char none = 0;
  z.next_in = &none;  // zlib refuses null pointers even with nothing to read or write
  z.next_out = &none;
  int rc = Z_OK;
  for (;;) {
    if (z.avail_in == 0 && in_pos < in_size) {
      const int64_t take = std::min(kChunk, in_size - in_pos);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
      z.avail_in = static_cast<uInt>(take);
      in_pos += take;
    }
    if (z.avail_out == 0 && out_pos < size) {
      const int64_t give = std::min(kChunk, size - out_pos);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
      z.avail_out = static_cast<uInt>(give);
      out_pos += give;
    }
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    const bool more = (z.avail_in == 0 && in_pos < in_size) || (z.avail_out == 0 && out_pos < size);
    if (rc == Z_OK || (rc == Z_BUF_ERROR && more)) continue;
    break;  // corrupt data, input ended early, or more output than the declared size
  }
  const int64_t produced = out_pos - static_cast<int64_t>(z.avail_out);
  const char* msg = z.msg;
  inflateEnd(&z);
  MIXLAB_CHECK(rc == Z_STREAM_END, "{}: deflate data is corrupt or truncated ({}; {} of {} bytes inflated)", what,
               msg ? msg : "the stream does not end where the size says", produced, size);
  MIXLAB_CHECK(produced == size, "{}: inflated to {} bytes but the directory says {}", what, produced, size);
  return out;
}

}  // namespace

bool zip_is_archive(std::string_view bytes) {
  return bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' &&
         ((bytes[2] == 3 && bytes[3] == 4) || (bytes[2] == 5 && bytes[3] == 6));
}

std::vector<ZipEntry> zip_read_entries(std::string_view bytes, const std::string& origin) {
  const Reader r{bytes, origin};
  const Directory d = find_directory(r);
  std::vector<ZipEntry> out;
  int64_t off = d.offset;
  for (int64_t i = 0; i < d.entries; ++i) {
    MIXLAB_CHECK(r.u32(off, "central directory header") == kCentralHeaderSig,
                 "{}: zip archive's central directory is corrupt: entry {} has no header signature at offset {}",
                 origin, i, off);
    const uint16_t flags = r.u16(off + 8, "flags");
    const uint16_t method = r.u16(off + 10, "method");
    const uint32_t crc = r.u32(off + 16, "crc-32");
    int64_t csize = r.u32(off + 20, "compressed size");
    int64_t usize = r.u32(off + 24, "size");
    const int64_t name_len = r.u16(off + 28, "name length");
    const int64_t extra_len = r.u16(off + 30, "extra length");
    const int64_t comment_len = r.u16(off + 32, "comment length");
    int64_t local = r.u32(off + 42, "local header offset");
    r.need(off + kCentralHeaderSize, name_len + extra_len + comment_len, "an entry name");
    ZipEntry e;
    e.name = std::string(bytes.substr(static_cast<size_t>(off + kCentralHeaderSize), static_cast<size_t>(name_len)));
    const std::string what = fmt::format("{}: zip entry '{}'", origin, shown_text(e.name));
    // zip64: the fields saturated at 0xFFFFFFFF are in the 0x0001 extra field, in this order.
    const int64_t extra = off + kCentralHeaderSize + name_len;
    for (int64_t x = extra; x + 4 <= extra + extra_len;) {
      const uint16_t id = r.u16(x, "extra field id"), len = r.u16(x + 2, "extra field length");
      MIXLAB_CHECK(x + 4 + len <= extra + extra_len, "{}: extra field overruns its header", what);
      if (id == kZip64ExtraId) {
        int64_t p = x + 4;
        for (int64_t* field : {&usize, &csize, &local}) {
          if (*field != 0xFFFFFFFF) continue;
          MIXLAB_CHECK(p + 8 <= x + 4 + len, "{}: zip64 extra field is too short", what);
          *field = r.u64(p, "zip64 field");
          p += 8;
        }
      }
      x += 4 + len;
    }
    MIXLAB_CHECK(!(flags & 1), "{}: encrypted entries are not supported", what);
    MIXLAB_CHECK(method == kStored || method == kDeflated,
                 "{}: compression method {} is not supported (expected 0 stored, np.savez, or 8 deflate, "
                 "np.savez_compressed)",
                 what, method);
    MIXLAB_CHECK(usize <= kZipMaxEntryBytes, "{}: size {} is more than the {} bytes an entry may have", what, usize,
                 kZipMaxEntryBytes);
    MIXLAB_CHECK(r.u32(local, "local header") == kLocalHeaderSig,
                 "{}: no local header at offset {} (the archive is corrupt)", what, local);
    const int64_t data =
        local + kLocalHeaderSize + r.u16(local + 26, "local name length") + r.u16(local + 28, "local extra length");
    r.need(data, csize, "entry data");
    const std::string_view raw = bytes.substr(static_cast<size_t>(data), static_cast<size_t>(csize));
    if (method == kStored) {
      MIXLAB_CHECK(csize == usize, "{}: stored entry has {} bytes but a size of {}", what, csize, usize);
      e.bytes = std::string(raw);
    } else {
      // Deflate turns one compressed byte into at most 1032 bytes (258-byte matches in 2 bits): a
      // larger size is corrupt, refused before `usize` bytes are allocated for it.
      MIXLAB_CHECK(usize <= csize * kDeflateMaxRatio,
                   "{}: the directory says {} bytes inflated from {} compressed, more than deflate can produce "
                   "({}:1); the archive is corrupt",
                   what, usize, csize, kDeflateMaxRatio);
      e.bytes = inflate_entry(raw, usize, what);
    }
    // crc32 takes 32-bit lengths: fold in chunks.
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t p = 0; p < e.bytes.size(); p += size_t{1} << 30) {
      const size_t n = std::min(e.bytes.size() - p, size_t{1} << 30);
      c = crc32(c, reinterpret_cast<const Bytef*>(e.bytes.data() + p), static_cast<uInt>(n));
    }
    MIXLAB_CHECK(c == crc,
                 "{}: CRC-32 mismatch (the directory says {:08x}, the data gives {:08x}): the file is corrupt", what,
                 crc, c);
    out.push_back(std::move(e));
    off += kCentralHeaderSize + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace mixlab
