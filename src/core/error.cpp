#include "mixlab/core/error.h"

namespace mixlab::detail {

void throw_error(const std::string& message) { throw Error(message); }

void throw_io(const std::string& message) { throw IoError(message); }

void throw_internal(const char* file, int line, const char* cond, const std::string& message) {
  throw InternalError(fmt::format("mixlab internal error at {}:{}: ({}) failed: {}", file, line, cond, message));
}

}  // namespace mixlab::detail
