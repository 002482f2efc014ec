// Local launcher for `--nproc N` (see launch.h).
#include "mixlab/dist/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include "mixlab/core/error.h"

extern char** environ;

namespace mixlab {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_forward_signal = 0;
void remember_signal(int sig) { g_forward_signal = sig; }

// The environment of one worker: ours without the launch variables, plus the worker's own.
std::vector<std::string> worker_environment(const LaunchOptions& o, int64_t rank, int64_t port) {
  static const char* kLaunchVars[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=", "MASTER_PORT="};
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    bool launch_var = false;
    for (const char* v : kLaunchVars) launch_var = launch_var || kv.rfind(v, 0) == 0;
    for (const auto& extra : o.extra_env)
      launch_var = launch_var || kv.rfind(extra.substr(0, extra.find('=') + 1), 0) == 0;
    if (!launch_var) env.push_back(kv);
  }
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("LOCAL_RANK={}", rank));
  env.push_back(fmt::format("WORLD_SIZE={}", o.nproc));
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back(fmt::format("MASTER_PORT={}", port));
  for (const auto& extra : o.extra_env) env.push_back(extra);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return "stopped";
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Whether a socket already listens on 127.0.0.1:port (or on every address, which covers it).
// SO_REUSEADDR, as the rendezvous store binds, so a connection in TIME_WAIT does not count.
bool local_port_listened_on(int64_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;  // cannot tell: the store reports it if so
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool in_use = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return in_use;
}

}  // namespace

int64_t free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  MIXLAB_CHECK_IO(fd >= 0, "free_local_port: cannot open a socket: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  MIXLAB_CHECK_IO(ok, "free_local_port: cannot bind a port on 127.0.0.1: {}", std::strerror(err));
  return ntohs(addr.sin_port);
}

int launch_local_workers(const LaunchOptions& o, const std::vector<std::string>& args) {
  MIXLAB_CHECK(o.nproc >= 1, "--nproc must be >= 1, got {}", o.nproc);
  MIXLAB_CHECK(o.master_port >= 0 && o.master_port <= 65535, "--master-port must lie in [1, 65535], got {}",
               o.master_port);
  const int64_t port = o.master_port > 0 ? o.master_port : free_local_port();
  // A taken port is refused here, before any worker starts: otherwise a worker may reach whatever
  // listens there and fail with a message about that server instead of about the port.
  MIXLAB_CHECK(!(o.master_port > 0 && local_port_listened_on(port)),
               "--master-port {}: the port is already in use on 127.0.0.1; choose another port (or leave "
               "--master-port out for a free one)",
               port);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  MIXLAB_CHECK_IO(n > 0, "--nproc: cannot find this executable (/proc/self/exe): {}", std::strerror(errno));
  self[n] = '\0';

  struct sigaction forward {
  }, old_int{}, old_term{};
  forward.sa_handler = remember_signal;
  sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  g_forward_signal = 0;

  std::vector<pid_t> pids;
  for (int64_t r = 0; r < o.nproc; ++r) {
    std::vector<std::string> argv_s{self};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s = worker_environment(o, r, port);
    auto argv = c_strings(argv_s), envp = c_strings(env_s);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, self, nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      ::sigaction(SIGINT, &old_int, nullptr);
      ::sigaction(SIGTERM, &old_term, nullptr);
      MIXLAB_CHECK_IO(false, "--nproc: cannot start worker rank {}: {}", r, std::strerror(rc));
    }
    pids.push_back(pid);
  }

  // Wait for all; the first failure stops the others.
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  int result = 0;
  bool stopping = false;
  Clock::time_point stop_at{};
  while (remaining > 0) {
    if (g_forward_signal && !stopping) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], g_forward_signal);
      stopping = true;
      stop_at = Clock::now();
      result = 128 + g_forward_signal;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != pid || done[i]) continue;
        done[i] = true;
        --remaining;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && !stopping) {
          std::cerr << fmt::format("mixlab: error: worker rank {} (pid {}) {}; stopping the other {} worker(s)\n", i,
                                   pid, describe(status), remaining);
          result = exit_code(status);
          for (size_t j = 0; j < pids.size(); ++j)
            if (!done[j]) ::kill(pids[j], SIGTERM);
          stopping = true;
          stop_at = Clock::now();
        }
      }
      continue;
    }
    if (stopping && Clock::now() - stop_at > o.grace) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) ::kill(pids[i], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace mixlab
