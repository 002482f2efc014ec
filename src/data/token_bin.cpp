// nanoGPT token files: uint16 little-endian ids, memory-mapped (mixlab/data/token_bin.h).
#include "mixlab/data/token_bin.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixlab/core/error.h"

namespace mixlab {

std::shared_ptr<TokenBinFile> TokenBinFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MIXLAB_CHECK_IO(fd >= 0, "token file '{}': cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    MIXLAB_FAIL("token file '{}': not a regular file", path);
  }
  const auto bytes = static_cast<int64_t>(st.st_size);
  if (bytes == 0 || bytes % 2 != 0) {
    ::close(fd);
    MIXLAB_CHECK(bytes != 0, "token file '{}' is empty (expected uint16 token ids)", path);
    MIXLAB_FAIL("token file '{}' has {} bytes, an odd size: expected uint16 token ids (2 bytes each)", path, bytes);
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid
  MIXLAB_CHECK_IO(map != MAP_FAILED, "token file '{}': cannot mmap: {}", path, std::strerror(err));
  std::shared_ptr<TokenBinFile> f(new TokenBinFile());
  f->map_ = map;
  f->map_bytes_ = static_cast<size_t>(bytes);
  f->tokens_ = static_cast<const uint16_t*>(map);
  f->size_ = bytes / 2;
  f->path_ = path;
  return f;
}

TokenBinFile::~TokenBinFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace mixlab
