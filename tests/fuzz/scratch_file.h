// tests/fuzz/scratch_file.h — one file per process that a fuzz target rewrites with each input,
// for the readers that take a path (config_load, checkpoint_read, LmTokenFile::open,
// TokenBinFile::open) and so are fuzzed exactly as mixlab calls them.
//
// The file lives in /dev/shm when it exists (no disk writes at 10^5 inputs per second), else in
// $TMPDIR or /tmp; its name holds the pid, so parallel fuzzers never share one. It is removed
// at exit.
#pragma once

#include <string>
#include <string_view>

namespace mixlab::fuzz {

/// Replaces the scratch file's contents with `bytes` and returns its path (`suffix` ends the
/// name, e.g. ".json"; one file per suffix).
const std::string& scratch_file_write(std::string_view bytes, const std::string& suffix);

}  // namespace mixlab::fuzz
