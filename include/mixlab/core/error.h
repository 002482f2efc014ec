// mixlab/core/error.h — the error types and the checks every public boundary uses.
//
// Split taken from ATen: MIXLAB_CHECK is for anything a caller can trigger (bad shapes, bad
// specs, corrupt files) and throws mixlab::Error with a message that names the argument, what
// was expected and what came. MIXLAB_ASSERT is for invariants of mixlab itself (a bug if it
// fires) and throws mixlab::InternalError. The library never calls abort() or exit().
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

/// A broken internal invariant (a mixlab bug). Carries file:line.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void throw_error(const std::string& message);
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
