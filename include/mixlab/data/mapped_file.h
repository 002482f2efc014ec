// mixlab/data/mapped_file.h — a whole file mapped read-only (mmap), the one mapping code behind
// the LM token cache (lm_cache.h) and nanoGPT token files (token_bin.h).
//
// Opening maps the file and reads nothing; pages are read as they are touched. The mapping stays
// valid until the object is destroyed (the descriptor is closed at once). An empty file has no
// mapping: data() is null and size() 0.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace mixlab {

class MappedFile {
 public:
  /// Maps `path`. Errors start with `what` (e.g. "token file 'x.bin'"): mixlab::IoError when the
  /// file cannot be opened or mapped, mixlab::Error when it is not a regular file.
  static std::shared_ptr<MappedFile> open(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(map_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mixlab
