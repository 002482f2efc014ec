// The libFuzzer entry of one fuzz target (tests/fuzz/CMakeLists.txt builds this file once per
// target, with MIXLAB_FUZZ_TARGET naming it): each input goes through fuzz_run, so a broken
// contract (tests/fuzz/fuzz_target.h) escapes as an uncaught FuzzFinding and libFuzzer reports
// it as a crash with the input saved.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_target.h"

#ifndef MIXLAB_FUZZ_TARGET
#error "MIXLAB_FUZZ_TARGET must name the target, e.g. -DMIXLAB_FUZZ_TARGET=\"npy\""
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mixlab::fuzz::FuzzTarget& target = mixlab::fuzz::fuzz_target(MIXLAB_FUZZ_TARGET);
  (void)mixlab::fuzz::fuzz_run(target, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
