// mixlab/mixer/state_io.h — the one binary format of decode states (every mixer and the model).
//
// A state lists what it holds through MixerState::io(StateArchive&): named int64 scalars and
// tensors, in a fixed order; nested states (BRL's local window) go through nested(). The same
// io() writes (save, fork) and reads (load): a loader first builds a fresh state with
// init_state(batch), then io() replaces its fields by the stored ones. So a state class never
// parses bytes and the format lives in one place (src/mixer/state_io.cpp).
//
// File layout, version 1 (integers little-endian as this machine writes them; checked by a
// byte-order mark):
//   magic      8 bytes  "MIXLABST"
//   version    u32      kStateFormatVersion
//   byte order u32      0x01020304
//   spec       u32 length + bytes   the canonical mixer spec (or the model's description)
//   batch      i64
//   position   i64      tokens consumed
//   entries    u32      number of entries
//   payload    u64      bytes of the entries that follow
//   entries:   name (u16 length + bytes), kind u8 (0 int64 scalar, 1 tensor, 2 undefined tensor),
//              scalar: i64; tensor: dtype u8 (c10::ScalarType code), ndim u8, sizes i64 x ndim,
//              then the raw contiguous element bytes (numel x element size)
//   checksum   u64      FNV-1a 64 (core/checksum.h) over every byte before it
// Not torch::save pickles: the bytes are ours, so a corrupt or truncated file gets a message that
// says what is wrong instead of a pickle error, and the format does not move with LibTorch.
//
// Errors (mixlab::Error, naming the source — a path or "stream"): not a state (magic), an
// unsupported version, another byte order, truncated (fewer payload bytes than the header
// says), checksum mismatch (corrupt), a state of another mixer spec, an entry that is not the
// one the state expects (name, kind, dtype, shape), entries left over.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace mixlab {

class MixerState;

constexpr uint32_t kStateFormatVersion = 1;

/// One named item of a state.
struct StateEntry {
  enum class Kind : uint8_t { kScalar = 0, kTensor = 1, kUndefined = 2 };
  std::string name;
  Kind kind = Kind::kScalar;
  int64_t scalar = 0;
  torch::Tensor tensor;  // CPU, contiguous
};

/// A whole state as stored: header fields plus its entries in order.
struct StateRecord {
  std::string spec;
  int64_t batch = 0;
  int64_t position = 0;
  std::vector<StateEntry> entries;
};

/// Encodes `record` in the format above (the checksum is computed here).
std::string state_encode(const StateRecord& record);
/// Decodes and verifies bytes (magic, version, byte order, length, checksum). `source` names the
/// bytes in messages (a path, or "stream"). The spec is not checked here: see state_check_spec.
StateRecord state_decode(const std::string& bytes, const std::string& source);
/// Throws unless record.spec == expected ("saved for mixer 'A', this mixer is 'B'").
void state_check_spec(const StateRecord& record, const std::string& expected, const std::string& source);

/// Stream and file helpers around encode/decode.
void state_write(std::ostream& out, const StateRecord& record);
StateRecord state_read(std::istream& in, const std::string& source = "stream");
/// Written atomically and durably (core/atomic_file.h).
void state_write_file(const std::string& path, const StateRecord& record);
StateRecord state_read_file(const std::string& path);

/// The two-way visitor a state's io() talks to. Writing collects entries; reading hands them
/// back in the same order and checks each against what the state expects.
class StateArchive {
 public:
  /// A writing archive (entries collected; tensors are referenced, not copied, unless `copy`).
  static StateArchive writer(bool copy = false);
  /// A reading archive over decoded entries; `source` names them in messages.
  static StateArchive reader(std::vector<StateEntry> entries, std::string source);

  bool loading() const { return loading_; }
  /// An int64 scalar: stored from v, or read into v.
  void scalar(const std::string& name, int64_t& v);
  /// A bool stored as a scalar 0/1.
  void flag(const std::string& name, bool& v);
  /// A tensor (may be undefined). Reading: when `t` is defined beforehand (the fresh state's
  /// tensor) the stored one must have its dtype and, when `same_shape`, its sizes, else its
  /// number of dims and dim 0 (the batch); an undefined `t` takes any stored tensor.
  void tensor(const std::string& name, torch::Tensor& t, bool same_shape = true);
  /// A state inside this one, its entry names prefixed by `name` + "/".
  void nested(const std::string& name, MixerState& state);

  /// Reading: throws when entries remain unread. Writing: no-op.
  void finish() const;
  /// Writing: the entries collected.
  std::vector<StateEntry>& entries() { return entries_; }

 private:
  StateArchive(bool loading, bool copy, std::vector<StateEntry> entries, std::string source);
  const StateEntry& next(const std::string& name, const char* kind);
  bool loading_;
  bool copy_;
  std::vector<StateEntry> entries_;
  size_t cursor_ = 0;
  std::string source_;
  std::string prefix_;
};

}  // namespace mixlab
