// The fuzz targets' scratch file (tests/fuzz/scratch_file.h).
#include "fuzz/scratch_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>

namespace mixlab::fuzz {
namespace {

std::string scratch_dir() {
  if (std::filesystem::is_directory("/dev/shm")) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

// Paths by suffix; removed when the process exits normally (libFuzzer exits through exit()).
struct ScratchFiles {
  std::map<std::string, std::string> paths;
  ~ScratchFiles() {
    for (const auto& [suffix, path] : paths) std::remove(path.c_str());
  }
};

}  // namespace

const std::string& scratch_file_write(std::string_view bytes, const std::string& suffix) {
  static ScratchFiles files;
  auto it = files.paths.find(suffix);
  if (it == files.paths.end()) {
    const std::string path = scratch_dir() + "/mixlab-fuzz-" + std::to_string(getpid()) + suffix;
    it = files.paths.emplace(suffix, path).first;
  }
  std::FILE* f = std::fopen(it->second.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("fuzz scratch file '" + it->second + "' cannot be written");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("fuzz scratch file '" + it->second + "': short write");
  return it->second;
}

}  // namespace mixlab::fuzz
