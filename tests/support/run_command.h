// tests/support/run_command.h — runs a shell command and captures its output and exit code, for
// the CLI tests (one helper instead of a popen loop per test file).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

struct RunResult {
  int code = -1;
  std::string output;  // stdout and stderr together (the command should redirect 2>&1)
};

inline RunResult run_command(const std::string& cmd) {
  RunResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), got);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
