// The launch fingerprint: build identity, serialisation and the field-by-field comparison (see
// launch_fingerprint.h).
#include "mixlab/dist/launch_fingerprint.h"

#include <torch/version.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "mixlab/core/checksum.h"
#include "mixlab/core/error.h"
#include "mixlab/version.h"

namespace mixlab {
namespace {

std::string compute_executable_identity() {
  // /proc/self/exe opens the file this process runs even if it was renamed or replaced since.
  std::ifstream in("/proc/self/exe", std::ios::binary);
  MIXLAB_CHECK_IO(in.is_open(), "launch fingerprint: cannot read this executable (/proc/self/exe): {}",
                  std::strerror(errno));
  std::vector<char> chunk(size_t{1} << 20);
  uint64_t sum = checksum64({});
  int64_t bytes = 0;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<size_t>(in.gcount());
    sum = checksum64(std::string_view(chunk.data(), n), sum);
    bytes += static_cast<int64_t>(n);
  }
  MIXLAB_CHECK_IO(in.eof(), "launch fingerprint: reading this executable (/proc/self/exe) failed after {} bytes",
                  bytes);
  return fmt::format("mixlab {}, LibTorch {}, executable of {} bytes, FNV-1a 64 {:#018x}", MIXLAB_VERSION_STRING,
                     TORCH_VERSION, bytes, sum);
}

}  // namespace

std::string executable_identity() {
  static const std::string identity = compute_executable_identity();
  return identity;
}

void fingerprint_add_json(LaunchFingerprint& fingerprint, const std::string& prefix, const nlohmann::json& object) {
  MIXLAB_CHECK(object.is_object(), "fingerprint_add_json('{}'): expected a JSON object, got {}", prefix,
               object.type_name());
  for (const auto& [key, value] : object.items()) fingerprint[prefix + key] = value.dump();
}

std::string fingerprint_to_text(const LaunchFingerprint& fingerprint) { return nlohmann::json(fingerprint).dump(); }

LaunchFingerprint fingerprint_from_text(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(
        fmt::format("{}: expected a launch fingerprint (a JSON object), got malformed JSON: {}", origin, e.what()));
  }
  MIXLAB_CHECK(j.is_object(), "{}: expected a launch fingerprint (a JSON object), got {}", origin, j.type_name());
  LaunchFingerprint f;
  for (const auto& [key, value] : j.items()) {
    MIXLAB_CHECK(value.is_string(), "{}: fingerprint field '{}' must be a string, got {}", origin, key,
                 value.type_name());
    f[key] = value.get<std::string>();
  }
  return f;
}

std::string fingerprint_difference(const LaunchFingerprint& a, int64_t rank_a, const LaunchFingerprint& b,
                                   int64_t rank_b, size_t max_fields) {
  static const std::string kAbsent = "(absent)";
  std::vector<std::string> differences;
  size_t count = 0;
  auto note = [&](const std::string& field, const std::string& va, const std::string& vb) {
    if (va == vb) return;
    if (++count <= max_fields)
      differences.push_back(fmt::format("'{}': rank {} has {}, rank {} has {}", field, rank_a, va, rank_b, vb));
  };
  for (const auto& [field, value] : a) {
    const auto it = b.find(field);
    note(field, value, it == b.end() ? kAbsent : it->second);
  }
  for (const auto& [field, value] : b)
    if (a.find(field) == a.end()) note(field, kAbsent, value);
  if (count == 0) return {};
  std::string out = fmt::format("{}", fmt::join(differences, "; "));
  if (count > differences.size()) out += fmt::format("; and {} more field(s)", count - differences.size());
  return out;
}

}  // namespace mixlab
