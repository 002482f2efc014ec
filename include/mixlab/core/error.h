// mixlab/core/error.h — the error types and the checks every public boundary uses.
//
// Split taken from ATen: MIXLAB_CHECK is for anything a caller can trigger (bad shapes, bad
// specs, corrupt files) and throws mixlab::Error with a message that names the argument, what
// was expected and what came. MIXLAB_ASSERT is for invariants of mixlab itself (a bug if it
// fires) and throws mixlab::InternalError. The library never calls abort() or exit().
//
// One header for every error type and the CLI's exit code of each (README.md,
// docs/RELIABILITY.md): Error 2, IoError 3, NonFiniteError 4, anything else 1.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace mixlab {

/// A caller error: invalid argument, malformed spec/config/checkpoint. Message is user-facing.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// An input/output or resource failure (disk full, unwritable path, run directory locked). The
/// message names the path.
class IoError : public Error {
 public:
  using Error::Error;
};

/// Training (or evaluation) produced a non-finite loss or gradient.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

/// A broken internal invariant (a mixlab bug). Carries file:line.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// The CLI's exit codes, one per error type above.
enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,  // a mixlab bug or an unexpected library failure
  kExitUser = 2,      // bad flag, config, spec or checkpoint (Error)
  kExitIo = 3,        // file unreadable/unwritable, disk full, run dir locked, out of memory (IoError)
  kExitDiverged = 4,  // non-finite loss or gradient (NonFiniteError)
};

namespace detail {
[[noreturn]] void throw_error(const std::string& message);
[[noreturn]] void throw_io(const std::string& message);
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& message);
}  // namespace detail

}  // namespace mixlab

/// Throws mixlab::Error(fmt::format(...)) when `cond` is false.
#define MIXLAB_CHECK(cond, ...)                                           \
  do {                                                                    \
    if (!(cond)) ::mixlab::detail::throw_error(fmt::format(__VA_ARGS__)); \
  } while (0)

/// Throws mixlab::InternalError naming file:line when `cond` is false.
#define MIXLAB_ASSERT(cond, ...)                                                                        \
  do {                                                                                                  \
    if (!(cond)) ::mixlab::detail::throw_internal(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

/// Throws mixlab::Error(fmt::format(...)) unconditionally; [[noreturn]], so no dummy return after
/// it (replaces the `MIXLAB_CHECK(false, ...); return {};` pattern).
#define MIXLAB_FAIL(...) ::mixlab::detail::throw_error(fmt::format(__VA_ARGS__))

/// Throws mixlab::IoError(fmt::format(...)) when `cond` is false. The message must name the path.
#define MIXLAB_CHECK_IO(cond, ...)                                     \
  do {                                                                 \
    if (!(cond)) ::mixlab::detail::throw_io(fmt::format(__VA_ARGS__)); \
  } while (0)
