// The one decode-state format (layout in mixlab/mixer/state_io.h): encoder, verifying decoder,
// and the two-way archive state classes list their fields to.
#include "mixlab/mixer/state_io.h"

#include <cstring>
#include <istream>
#include <iterator>
#include <ostream>

#include "mixlab/core/atomic_file.h"
#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/core/shown_text.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/mixer/mixer.h"

namespace mixlab {
namespace {

constexpr char kMagic[8] = {'M', 'I', 'X', 'L', 'A', 'B', 'S', 'T'};
constexpr uint32_t kByteOrderMark = 0x01020304u;
// A state file larger than this is not one we wrote (a 64k-token attention cache of a small
// model is a few MB); the bound keeps a corrupt length field from allocating without limit.
constexpr int64_t kMaxStateBytes = int64_t{1} << 36;
// The most sequences a state holds: loading builds init_state(batch) before reading the entries,
// so a header's batch must not ask for an absurd allocation (a fuzzed header asked for 2^54).
constexpr int64_t kMaxStateBatch = int64_t{1} << 16;
constexpr size_t kMaxSpecBytes = 1 << 16;

// The dtypes a state may hold; anything else is refused on both sides.
bool dtype_supported(torch::ScalarType t) {
  return t == torch::kFloat32 || t == torch::kFloat64 || t == torch::kInt64 || t == torch::kInt32 ||
         t == torch::kBool || t == torch::kFloat16 || t == torch::kBFloat16;
}

class Out {
 public:
  template <class T>
  void put(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_bytes(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  void put_string16(const std::string& s) {
    MIXLAB_CHECK(s.size() < 65536, "state format: entry name longer than 65535 bytes ({})", s.size());
    put<uint16_t>(static_cast<uint16_t>(s.size()));
    put_bytes(s.data(), s.size());
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class In {
 public:
  In(const std::string& bytes, size_t begin, size_t end, const std::string& source)
      : bytes_(bytes), pos_(begin), end_(end), source_(source) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string(size_t n, const char* what) {
    need(n, what);
    std::string s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  const char* take(size_t n, const char* what) {
    need(n, what);
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }

 private:
  void need(size_t n, const char* what) const {
    MIXLAB_CHECK(n <= end_ - pos_, "state '{}': truncated while reading {} (needs {} bytes at offset {}, {} left)",
                 source_, what, n, pos_, end_ - pos_);
  }
  const std::string& bytes_;
  size_t pos_, end_;
  const std::string& source_;
};

const char* kind_name(StateEntry::Kind k) {
  switch (k) {
    case StateEntry::Kind::kScalar:
      return "scalar";
    case StateEntry::Kind::kTensor:
      return "tensor";
    case StateEntry::Kind::kUndefined:
      return "undefined tensor";
  }
  return "?";
}

}  // namespace

std::string state_encode(const StateRecord& record) {
  Out payload;
  for (const auto& e : record.entries) {
    payload.put_string16(e.name);
    payload.put<uint8_t>(static_cast<uint8_t>(e.kind));
    if (e.kind == StateEntry::Kind::kScalar) {
      payload.put<int64_t>(e.scalar);
    } else if (e.kind == StateEntry::Kind::kTensor) {
      auto t = e.tensor.detach().cpu().contiguous();
      MIXLAB_CHECK(dtype_supported(t.scalar_type()), "state format: entry '{}' has unsupported dtype {}", e.name,
                   c10::toString(t.scalar_type()));
      MIXLAB_CHECK(t.dim() < 256, "state format: entry '{}' has {} dims", e.name, t.dim());
      payload.put<uint8_t>(static_cast<uint8_t>(t.scalar_type()));
      payload.put<uint8_t>(static_cast<uint8_t>(t.dim()));
      for (auto s : t.sizes()) payload.put<int64_t>(s);
      payload.put_bytes(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    }
  }
  MIXLAB_CHECK(record.spec.size() < kMaxSpecBytes, "state format: spec longer than {} bytes", kMaxSpecBytes);
  Out out;
  out.put_bytes(kMagic, sizeof(kMagic));
  out.put<uint32_t>(kStateFormatVersion);
  out.put<uint32_t>(kByteOrderMark);
  out.put<uint32_t>(static_cast<uint32_t>(record.spec.size()));
  out.put_bytes(record.spec.data(), record.spec.size());
  out.put<int64_t>(record.batch);
  out.put<int64_t>(record.position);
  out.put<uint32_t>(static_cast<uint32_t>(record.entries.size()));
  out.put<uint64_t>(static_cast<uint64_t>(payload.bytes().size()));
  out.bytes() += payload.bytes();
  out.put<uint64_t>(checksum64(out.bytes()));
  return std::move(out.bytes());
}

StateRecord state_decode(const std::string& bytes, const std::string& source) {
  MIXLAB_CHECK(bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
               "state '{}': not a mixlab decode state (expected magic MIXLABST, got {} bytes{})", source, bytes.size(),
               bytes.size() >= sizeof(kMagic) ? " starting otherwise" : "");
  In in(bytes, sizeof(kMagic), bytes.size(), source);
  const auto version = in.get<uint32_t>("the format version");
  MIXLAB_CHECK(version == kStateFormatVersion,
               "state '{}': format version {} is not supported (this build reads version {})", source, version,
               kStateFormatVersion);
  const auto bom = in.get<uint32_t>("the byte-order mark");
  MIXLAB_CHECK(bom == kByteOrderMark, "state '{}': written with another byte order (mark {:#010x})", source, bom);
  const auto spec_len = in.get<uint32_t>("the spec length");
  MIXLAB_CHECK(spec_len < kMaxSpecBytes, "state '{}': spec length {} is implausible (corrupt header)", source,
               spec_len);
  StateRecord r;
  r.spec = in.get_string(spec_len, "the spec");
  // The spec and the entry names are printable text; refusing control bytes here keeps every
  // later message that quotes them (a spec mismatch, an unexpected entry) on one line.
  const size_t spec_control = control_byte_offset(r.spec);
  MIXLAB_CHECK(spec_control == std::string::npos,
               "state '{}': the spec '{}' has a control character at offset {} (corrupt header)", source,
               shown_text(r.spec), spec_control);
  r.batch = in.get<int64_t>("the batch size");
  r.position = in.get<int64_t>("the position");
  const auto n_entries = in.get<uint32_t>("the entry count");
  const auto payload_len = in.get<uint64_t>("the payload length");
  const size_t header_end = in.pos();
  const size_t have = bytes.size() - header_end;
  MIXLAB_CHECK(payload_len <= static_cast<uint64_t>(kMaxStateBytes) && have >= sizeof(uint64_t) &&
                   payload_len <= have - sizeof(uint64_t),
               "state '{}': truncated: the header announces {} payload bytes + an 8-byte checksum, {} bytes follow",
               source, payload_len, have);
  MIXLAB_CHECK(payload_len == have - sizeof(uint64_t),
               "state '{}': {} unexpected bytes after the checksum (the header announces {} payload bytes)", source,
               have - sizeof(uint64_t) - payload_len, payload_len);
  const size_t body = header_end + payload_len;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  MIXLAB_CHECK(stored == checksum64(std::string_view(bytes.data(), body)),
               "state '{}': checksum mismatch: the file is corrupt (stored {:#018x}, computed {:#018x})", source,
               stored, checksum64(std::string_view(bytes.data(), body)));
  MIXLAB_CHECK(r.batch >= 1 && r.batch <= kMaxStateBatch && r.position >= 0,
               "state '{}': batch {} / position {} out of range (expected a batch in [1, {}] and a position >= 0)",
               source, r.batch, r.position, kMaxStateBatch);
  In p(bytes, header_end, body, source);
  for (uint32_t i = 0; i < n_entries; ++i) {
    StateEntry e;
    const auto name_len = p.get<uint16_t>("an entry name length");
    e.name = p.get_string(name_len, "an entry name");
    const size_t name_control = control_byte_offset(e.name);
    MIXLAB_CHECK(name_control == std::string::npos,
                 "state '{}': entry {} has the name '{}' with a control character at offset {} (corrupt entry)", source,
                 i, shown_text(e.name), name_control);
    const auto kind = p.get<uint8_t>("an entry kind");
    MIXLAB_CHECK(kind <= 2, "state '{}': entry '{}' has unknown kind {}", source, e.name, kind);
    e.kind = static_cast<StateEntry::Kind>(kind);
    if (e.kind == StateEntry::Kind::kScalar) {
      e.scalar = p.get<int64_t>("a scalar");
    } else if (e.kind == StateEntry::Kind::kTensor) {
      const auto dtype = static_cast<torch::ScalarType>(p.get<uint8_t>("a tensor dtype"));
      MIXLAB_CHECK(static_cast<int>(dtype) < static_cast<int>(torch::ScalarType::NumOptions) && dtype_supported(dtype),
                   "state '{}': entry '{}' has unsupported dtype code {}", source, e.name, static_cast<int>(dtype));
      const auto ndim = p.get<uint8_t>("a tensor rank");
      std::vector<int64_t> sizes(ndim);
      int64_t numel = 1;
      for (auto& s : sizes) {
        s = p.get<int64_t>("a tensor size");
        MIXLAB_CHECK(s >= 0 && s <= kMaxStateBytes && (s == 0 || numel <= kMaxStateBytes / s),
                     "state '{}': entry '{}' has an implausible size {}", source, e.name, s);
        numel *= s;
      }
      // The bytes must be in the file before the tensor is allocated: a header claiming a huge
      // tensor in a small file is "truncated", not an allocation of the claimed size.
      const size_t n = static_cast<size_t>(numel) * c10::elementSize(dtype);
      const char* data = p.take(n, "tensor data");
      e.tensor = torch::empty(sizes, torch::TensorOptions().dtype(dtype));
      if (n > 0) std::memcpy(e.tensor.data_ptr(), data, n);
    }
    r.entries.push_back(std::move(e));
  }
  MIXLAB_CHECK(p.pos() == body, "state '{}': {} payload bytes after the last of {} entries", source, body - p.pos(),
               n_entries);
  return r;
}

void state_check_spec(const StateRecord& record, const std::string& expected, const std::string& source) {
  MIXLAB_CHECK(record.spec == expected, "state '{}': saved for mixer '{}', this mixer is '{}'", source, record.spec,
               expected);
}

void state_write(std::ostream& out, const StateRecord& record) {
  const std::string bytes = state_encode(record);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  MIXLAB_CHECK(out.good(), "state: writing {} bytes to the stream failed", bytes.size());
}

StateRecord state_read(std::istream& in, const std::string& source) {
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return state_decode(bytes, source);
}

void state_write_file(const std::string& path, const StateRecord& record) {
  atomic_write_file(path, state_encode(record));
}

StateRecord state_read_file(const std::string& path) {
  return state_decode(file_read(path, kMaxStateBytes, "decode state"), path);
}

// ---- archive ----

StateArchive::StateArchive(bool loading, bool copy, std::vector<StateEntry> entries, std::string source)
    : loading_(loading), copy_(copy), entries_(std::move(entries)), source_(std::move(source)) {}

StateArchive StateArchive::writer(bool copy) { return StateArchive(false, copy, {}, ""); }

StateArchive StateArchive::reader(std::vector<StateEntry> entries, std::string source) {
  return StateArchive(true, false, std::move(entries), std::move(source));
}

const StateEntry& StateArchive::next(const std::string& name, const char* kind) {
  const std::string full = prefix_ + name;
  MIXLAB_CHECK(cursor_ < entries_.size(), "state '{}': missing {} '{}' (the state has {} entries)", source_, kind, full,
               entries_.size());
  const StateEntry& e = entries_[cursor_++];
  MIXLAB_CHECK(e.name == full, "state '{}': entry {} is '{}', expected {} '{}'", source_, cursor_ - 1, e.name, kind,
               full);
  return e;
}

void StateArchive::scalar(const std::string& name, int64_t& v) {
  if (!loading_) {
    StateEntry e;
    e.name = prefix_ + name;
    e.kind = StateEntry::Kind::kScalar;
    e.scalar = v;
    entries_.push_back(std::move(e));
    return;
  }
  const StateEntry& e = next(name, "scalar");
  MIXLAB_CHECK(e.kind == StateEntry::Kind::kScalar, "state '{}': entry '{}' is a {}, expected a scalar", source_,
               e.name, kind_name(e.kind));
  v = e.scalar;
}

void StateArchive::flag(const std::string& name, bool& v) {
  int64_t i = v ? 1 : 0;
  scalar(name, i);
  if (loading_) {
    MIXLAB_CHECK(i == 0 || i == 1, "state '{}': flag '{}{}' must be 0 or 1, got {}", source_, prefix_, name, i);
    v = i != 0;
  }
}

void StateArchive::tensor(const std::string& name, torch::Tensor& t, bool same_shape) {
  if (!loading_) {
    StateEntry e;
    e.name = prefix_ + name;
    if (t.defined()) {
      e.kind = StateEntry::Kind::kTensor;
      e.tensor = copy_ ? t.detach().clone() : t.detach();
    } else {
      e.kind = StateEntry::Kind::kUndefined;
    }
    entries_.push_back(std::move(e));
    return;
  }
  StateEntry& e = const_cast<StateEntry&>(next(name, "tensor"));
  MIXLAB_CHECK(e.kind != StateEntry::Kind::kScalar, "state '{}': entry '{}' is a scalar, expected a tensor", source_,
               e.name);
  if (e.kind == StateEntry::Kind::kUndefined) {
    t = torch::Tensor();
    return;
  }
  if (t.defined()) {
    MIXLAB_CHECK(e.tensor.scalar_type() == t.scalar_type(), "state '{}': tensor '{}' has dtype {}, expected {}",
                 source_, e.name, c10::toString(e.tensor.scalar_type()), c10::toString(t.scalar_type()));
    if (same_shape) {
      MIXLAB_CHECK(e.tensor.sizes() == t.sizes(), "state '{}': tensor '{}' has shape {}, expected {}", source_, e.name,
                   shape_string(e.tensor), shape_string(t));
    } else {
      MIXLAB_CHECK(e.tensor.dim() == t.dim() && (t.dim() == 0 || e.tensor.size(0) == t.size(0)),
                   "state '{}': tensor '{}' has shape {}, expected {} dims with size {} first", source_, e.name,
                   shape_string(e.tensor), t.dim(), t.dim() ? t.size(0) : 0);
    }
  }
  t = std::move(e.tensor);
}

void StateArchive::nested(const std::string& name, MixerState& state) {
  const std::string saved = prefix_;
  prefix_ += name + "/";
  state.io(*this);
  prefix_ = saved;
}

void StateArchive::finish() const {
  if (!loading_) return;
  MIXLAB_CHECK(cursor_ == entries_.size(), "state '{}': {} entries left unread after '{}' (first: '{}')", source_,
               entries_.size() - cursor_, cursor_ ? entries_[cursor_ - 1].name : "", entries_[cursor_].name);
}

}  // namespace mixlab
