#include "mixlab/core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mixlab/core/error.h"

namespace mixlab {

DirLock::DirLock(const std::string& dir, const std::string& what) {
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  MIXLAB_CHECK_IO(fd_ >= 0, "{} '{}': cannot create the lock file '{}': {}", what, dir, path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    MIXLAB_CHECK_IO(err != EWOULDBLOCK, "{} '{}' is in use by pid {} (lock file '{}')", what, dir, pid, path);
    MIXLAB_CHECK_IO(false, "{} '{}': cannot lock '{}': {}", what, dir, path, std::strerror(err));
  }
  // Record the holder for the message above; a failure here only loses that detail.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace mixlab
