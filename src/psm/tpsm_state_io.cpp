// Save / restore of a T-PSM decode state (Alg. 4): one versioned binary with a checksum.
//
// Layout (little-endian as written by this machine; all integers int64 unless noted):
//   magic "MXTPSMST" (8 bytes), version (uint32, = kTpsmStateVersion), dtype (uint32: 0 float32,
//   1 float64), spec length + spec bytes (the mixer's canonical spec; must match on load),
//   batch B, chunk c, width d, position, chunks t, buffer fill, slot count n,
//   n x { level, root (B*c*d values), fold (B*c*d values) }, buffer (B*c*d values),
//   checksum: uint64 FNV-1a over every byte before it.
// The counter's slot levels are checked against the binary digits of t by
// BinaryCounterScan::restore; position must equal t c + fill.
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "mixlab/core/error.h"
#include "mixlab/core/tensor_checks.h"
#include "mixlab/psm/tpsm.h"

namespace mixlab {
namespace {

constexpr char kMagic[8] = {'M', 'X', 'T', 'P', 'S', 'M', 'S', 'T'};
constexpr uint32_t kTpsmStateVersion = 1;

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

class Writer {
 public:
  template <class T>
  void put(T v) {
    const char* p = reinterpret_cast<const char*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  void put_tensor(const torch::Tensor& t) {
    auto c = t.detach().contiguous().cpu();
    put_bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  std::vector<char>& bytes() { return bytes_; }

 private:
  std::vector<char> bytes_;
};

class Reader {
 public:
  Reader(const std::vector<char>& bytes, size_t end, const std::string& path) : bytes_(bytes), end_(end), path_(path) {}
  template <class T>
  T get(const char* what) {
    T v;
    need(sizeof(T), what);
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string(size_t n, const char* what) {
    need(n, what);
    std::string s(bytes_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  torch::Tensor get_tensor(at::IntArrayRef shape, torch::ScalarType dtype, const char* what) {
    auto t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
    const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
    need(n, what);
    std::memcpy(t.data_ptr(), bytes_.data() + pos_, n);
    pos_ += n;
    return t;
  }
  size_t pos() const { return pos_; }

 private:
  void need(size_t n, const char* what) const {
    MIXLAB_CHECK(pos_ + n <= end_, "tpsm state file '{}': truncated while reading {}", path_, what);
  }
  const std::vector<char>& bytes_;
  size_t end_;
  std::string path_;
  size_t pos_ = 0;
};

}  // namespace

void TpsmMixer::save_state(const TpsmState& state, const std::string& path) const {
  MIXLAB_CHECK(state.counter_ != nullptr, "tpsm: save_state needs a state from init_state");
  const auto dtype = state.buf_.scalar_type();
  MIXLAB_CHECK(dtype == torch::kFloat32 || dtype == torch::kFloat64,
               "tpsm: save_state supports float32 and float64 states, got {}", c10::toString(dtype));
  Writer w;
  w.put_bytes(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kTpsmStateVersion);
  w.put<uint32_t>(dtype == torch::kFloat32 ? 0u : 1u);
  const std::string s = spec();
  w.put<int64_t>(static_cast<int64_t>(s.size()));
  w.put_bytes(s.data(), s.size());
  for (int64_t v : {state.batch_, options_.chunk, d_, state.position_, state.counter_->count(), state.fill_,
                    static_cast<int64_t>(state.counter_->slots().size())})
    w.put<int64_t>(v);
  for (const auto& slot : state.counter_->slots()) {
    w.put<int64_t>(slot.level);
    w.put_tensor(slot.root.to(dtype));
    w.put_tensor(slot.fold.to(dtype));
  }
  w.put_tensor(state.buf_);
  w.put<uint64_t>(fnv1a(w.bytes().data(), w.bytes().size()));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  MIXLAB_CHECK(out.good(), "tpsm: cannot open state file '{}' for writing", path);
  out.write(w.bytes().data(), static_cast<std::streamsize>(w.bytes().size()));
  MIXLAB_CHECK(out.good(), "tpsm: writing state file '{}' failed", path);
}

std::unique_ptr<TpsmState> TpsmMixer::load_state(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MIXLAB_CHECK(in.good(), "tpsm state file '{}': cannot open", path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MIXLAB_CHECK(bytes.size() >= sizeof(kMagic) + 8 + 8 && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
               "tpsm state file '{}': not a T-PSM state (expected magic MXTPSMST, {} bytes)", path, bytes.size());
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  Reader r(bytes, body, path);
  r.get_string(sizeof(kMagic), "magic");
  const auto version = r.get<uint32_t>("version");
  MIXLAB_CHECK(version == kTpsmStateVersion, "tpsm state file '{}': version {} is not supported (expected {})", path,
               version, kTpsmStateVersion);
  MIXLAB_CHECK(stored == fnv1a(bytes.data(), body), "tpsm state file '{}': checksum mismatch (file corrupt)", path);
  const auto dtype_code = r.get<uint32_t>("dtype");
  MIXLAB_CHECK(dtype_code <= 1, "tpsm state file '{}': unknown dtype code {}", path, dtype_code);
  const auto dtype = dtype_code == 0 ? torch::kFloat32 : torch::kFloat64;
  const auto spec_len = r.get<int64_t>("spec length");
  MIXLAB_CHECK(spec_len >= 0 && spec_len < 4096, "tpsm state file '{}': bad spec length {}", path, spec_len);
  const std::string saved_spec = r.get_string(static_cast<size_t>(spec_len), "spec");
  MIXLAB_CHECK(saved_spec == spec(), "tpsm state file '{}': saved for mixer '{}', this mixer is '{}'", path, saved_spec,
               spec());
  const auto B = r.get<int64_t>("batch"), c = r.get<int64_t>("chunk"), d = r.get<int64_t>("width");
  const auto position = r.get<int64_t>("position"), count = r.get<int64_t>("chunks");
  const auto fill = r.get<int64_t>("fill"), n = r.get<int64_t>("slot count");
  MIXLAB_CHECK(B >= 1 && B < (int64_t{1} << 24) && c == options_.chunk && d == d_,
               "tpsm state file '{}': shape (B,c,d) = ({},{},{}) does not fit this mixer (c = {}, d = {})", path, B, c,
               d, options_.chunk, d_);
  MIXLAB_CHECK(fill >= 0 && fill < c && count >= 0 && position == count * c + fill && n >= 0 && n <= 63,
               "tpsm state file '{}': inconsistent counters (position {}, chunks {}, fill {}, slots {})", path,
               position, count, fill, n);
  std::vector<TpsmState::Counter::Slot> slots;
  for (int64_t i = 0; i < n; ++i) {
    TpsmState::Counter::Slot slot;
    slot.level = r.get<int64_t>("slot level");
    slot.root = r.get_tensor({B, c, d}, dtype, "slot root");
    slot.fold = r.get_tensor({B, c, d}, dtype, "slot fold");
    slots.push_back(std::move(slot));
  }
  auto state = std::make_unique<TpsmState>();
  state->batch_ = B;
  state->position_ = position;
  state->fill_ = fill;
  state->buf_ = r.get_tensor({B, c, d}, dtype, "buffer");
  MIXLAB_CHECK(r.pos() == body, "tpsm state file '{}': {} unexpected bytes before the checksum", path, body - r.pos());
  state->counter_ = make_counter(B);
  state->counter_->restore(count, std::move(slots));
  return state;
}

}  // namespace mixlab
