#include "mixlab/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mixlab/core/error.h"

namespace mixlab {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Writes all of `bytes`, retrying short writes and EINTR. Returns 0 or the errno.
int write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

void fsync_dir(const std::string& dir, const std::string& path) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  MIXLAB_CHECK_IO(fd >= 0, "cannot write '{}': cannot open its directory '{}': {}", path, dir, errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems do not support fsync on a directory (EINVAL); the rename is done then.
  MIXLAB_CHECK_IO(rc == 0 || err == EINVAL, "cannot write '{}': fsync of directory '{}' failed: {}", path, dir,
                  errno_text(err));
}

std::atomic<uint64_t> g_temp_counter{0};

}  // namespace

void atomic_write_file(const std::string& path, std::string_view bytes) {
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), g_temp_counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  MIXLAB_CHECK_IO(fd >= 0, "cannot write '{}': cannot create '{}': {}", path, tmp, errno_text(errno));
  int err = write_all(fd, bytes);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    MIXLAB_CHECK_IO(false, "cannot write '{}': {}", path, errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    MIXLAB_CHECK_IO(false, "cannot write '{}': cannot rename '{}' to it: {}", path, tmp, errno_text(err));
  }
  fsync_dir(dir_of(path), path);
}

void durable_rename(const std::string& from, const std::string& to) {
  MIXLAB_CHECK_IO(::rename(from.c_str(), to.c_str()) == 0, "cannot rename '{}' to '{}': {}", from, to,
                  errno_text(errno));
  fsync_dir(dir_of(to), to);
}

namespace {

// "<name>.tmp.<pid>.<n>" as atomic_write_file makes them: both trailing fields all digits.
bool is_temp_name(const std::string& name) {
  const size_t mark = name.rfind(".tmp.");
  if (mark == std::string::npos || mark == 0) return false;
  const std::string tail = name.substr(mark + 5);
  const size_t dot = tail.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == tail.size()) return false;
  auto digits = [](const std::string& s) { return s.find_first_not_of("0123456789") == std::string::npos; };
  return digits(tail.substr(0, dot)) && digits(tail.substr(dot + 1));
}

}  // namespace

int64_t remove_stale_temp_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int64_t removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || !is_temp_name(it->path().filename().string())) continue;
    if (fs::remove(it->path(), ec)) ++removed;
  }
  MIXLAB_CHECK_IO(!ec, "'{}': cannot remove stale temporary files: {}", dir, ec.message());
  return removed;
}

std::string file_read(const std::string& path, int64_t max_bytes, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MIXLAB_CHECK_IO(fd >= 0, "{} {}: cannot open the file: {}", what, path, errno_text(errno));
  // A regular file is checked against the limit before any byte is read; a pipe (`<(...)`) is
  // read up to it; anything else (/dev/zero, a directory, a socket) would never end or is not a
  // file at all, and is refused.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
    ::close(fd);
    MIXLAB_FAIL("{} {}: not a regular file (expected a file written by mixlab or the tool named in its docs)", what,
                path);
  }
  if (S_ISREG(st.st_mode) && static_cast<int64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    MIXLAB_FAIL("{} {}: larger than the limit of {} bytes ({} bytes)", what, path, max_bytes,
                static_cast<int64_t>(st.st_size));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      MIXLAB_CHECK_IO(false, "{} {}: cannot read the file: {}", what, path, errno_text(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      ::close(fd);
      MIXLAB_FAIL("{} {}: larger than the limit of {} bytes", what, path, max_bytes);
    }
  }
  ::close(fd);
  return out;
}

AppendFile::AppendFile(const std::string& path, bool truncate) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  MIXLAB_CHECK_IO(fd_ >= 0, "cannot open '{}' for writing: {}", path, errno_text(errno));
}

AppendFile::AppendFile(AppendFile&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append_line(std::string_view line) {
  MIXLAB_ASSERT(fd_ >= 0, "append_line on a closed AppendFile");
  std::string text(line);
  text += '\n';
  int err = write_all(fd_, text);
  if (err == 0 && ::fdatasync(fd_) != 0) err = errno;
  MIXLAB_CHECK_IO(err == 0, "cannot write '{}': {}", path_, errno_text(err));
}

}  // namespace mixlab
