// An LD_PRELOAD shim for the kill-and-resume soak (scripts/soak.sh): the process SIGKILLs itself
// at its $MIXLAB_KILL_AT_FILE_OP-th file operation, so a kill lands inside a write for certain
// (a kill at a random time rarely does: the writes are a small part of a run). Counted, from
// process start: write()/pwrite() to a regular file, fsync()/fdatasync() (of a file or a
// directory) and rename(). At the chosen one the kill comes
//   - write/pwrite: after the first half of the bytes (a torn file);
//   - fsync/fdatasync: before it (written but not durable);
//   - rename: after it (renamed, the directory not yet fsync'ed).
// Before dying it writes "kill_shim: SIGKILL in <op> of <path>" to stderr, so the soak can say
// where its kills landed. Unset or 0: nothing is counted and nothing happens. Not part of mixlab.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdlib>
#include <string>

namespace {

long long g_left = -2;  // operations before the kill; -2: not read yet, -1: never

bool regular(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

// Counts one operation; true when it is the one to die at.
bool is_the_one() {
  if (g_left == -2) {
    const char* env = std::getenv("MIXLAB_KILL_AT_FILE_OP");
    g_left = env ? std::atoll(env) : 0;
    if (g_left <= 0) g_left = -1;
  }
  if (g_left < 0) return false;
  return --g_left == 0;
}

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

// The path behind `fd` (from /proc/self/fd), or "fd N".
std::string fd_path(int fd) {
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "fd " + std::to_string(fd);
}

[[noreturn]] void die(const char* op, const std::string& path) {
  static auto real_write = next<ssize_t (*)(int, const void*, size_t)>("write");
  const std::string line = std::string("kill_shim: SIGKILL in ") + op + " of " + path + "\n";
  if (real_write(2, line.data(), line.size()) < 0) {
    // Nothing to do: the kill matters, not the note.
  }
  ::raise(SIGKILL);
  std::abort();  // not reached: SIGKILL cannot be caught
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (regular(fd) && is_the_one()) {
    real(fd, buf, n / 2);
    die("write", fd_path(fd));
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static auto real = next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  if (regular(fd) && is_the_one()) {
    real(fd, buf, n / 2, off);
    die("pwrite", fd_path(fd));
  }
  return real(fd, buf, n, off);
}

int fsync(int fd) {
  static auto real = next<int (*)(int)>("fsync");
  if (is_the_one()) die("fsync", fd_path(fd));
  return real(fd);
}

int fdatasync(int fd) {
  static auto real = next<int (*)(int)>("fdatasync");
  if (is_the_one()) die("fdatasync", fd_path(fd));
  return real(fd);
}

int rename(const char* from, const char* to) {
  static auto real = next<int (*)(const char*, const char*)>("rename");
  const int rc = real(from, to);
  if (is_the_one()) die("rename", std::string(from) + " -> " + to);
  return rc;
}

}  // extern "C"
