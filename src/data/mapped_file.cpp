// A whole file mapped read-only (mixlab/data/mapped_file.h).
#include "mixlab/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixlab/core/error.h"

namespace mixlab {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MIXLAB_CHECK_IO(fd >= 0, "{}: cannot open: {}", what, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    MIXLAB_FAIL("{}: not a regular file", what);
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* map = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping stays valid
    MIXLAB_CHECK_IO(map != MAP_FAILED, "{}: cannot mmap: {}", what, std::strerror(err));
    f->map_ = map;
  } else {
    ::close(fd);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

}  // namespace mixlab
