// mixlab/core/fail.h — additions to error.h for issue 16: IoError, MIXLAB_FAIL, MIXLAB_CHECK_IO.
//
// Kept in its own header on the `rel` branch only so that it did not force a rebuild of every
// file that includes error.h; it belongs in error.h and can be folded into it at integration.
#pragma once

#include "mixlab/core/error.h"

namespace mixlab {

/// An input/output or resource failure (disk full, unwritable path, run directory locked). The
/// message names the path. The CLI exits with code 3 for these (docs/RELIABILITY.md).
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_io(const std::string& message);
}  // namespace detail

}  // namespace mixlab

/// Throws mixlab::Error(fmt::format(...)) unconditionally; [[noreturn]], so no dummy return after
/// it (replaces the `MIXLAB_CHECK(false, ...); return {};` pattern).
#define MIXLAB_FAIL(...) ::mixlab::detail::throw_error(fmt::format(__VA_ARGS__))

/// Throws mixlab::IoError(fmt::format(...)) when `cond` is false. The message must name the path.
#define MIXLAB_CHECK_IO(cond, ...)                                     \
  do {                                                                 \
    if (!(cond)) ::mixlab::detail::throw_io(fmt::format(__VA_ARGS__)); \
  } while (0)
