// An LD_PRELOAD shim for the full-disk tests (tests/cli/reliability_cli_test.cpp): write() and
// pwrite() to regular files fail with ENOSPC once $MIXLAB_ENOSPC_AFTER bytes have been written
// to regular files in this process, and so do fsync()/fdatasync() from then on. Writes to pipes
// and terminals (stdout, stderr) pass through, so the error message still reaches the test.
// Portable (no root, no tmpfs); not part of mixlab.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

long long g_budget = -2;  // -2: not read yet, -1: unlimited
bool g_full = false;

bool regular(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

// True when `n` more bytes to `fd` must fail.
bool refuse(int fd, size_t n) {
  if (g_budget == -2) {
    const char* env = std::getenv("MIXLAB_ENOSPC_AFTER");
    g_budget = env ? std::atoll(env) : -1;
  }
  if (g_budget < 0 || !regular(fd)) return false;
  if (g_full || static_cast<long long>(n) > g_budget) {
    g_full = true;
    return true;
  }
  g_budget -= static_cast<long long>(n);
  return false;
}

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (refuse(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static auto real = next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  if (refuse(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n, off);
}

int fsync(int fd) {
  static auto real = next<int (*)(int)>("fsync");
  if (g_full && regular(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd);
}

int fdatasync(int fd) {
  static auto real = next<int (*)(int)>("fdatasync");
  if (g_full && regular(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd);
}

}  // extern "C"
