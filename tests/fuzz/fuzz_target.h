// tests/fuzz/fuzz_target.h — the fuzz targets (issue 37 item 2): one plain function per parser
// that takes arbitrary bytes, so both the libFuzzer binaries (tests/fuzz/libfuzzer_main.cpp,
// built with clang by tests/fuzz/CMakeLists.txt) and the normal GoogleTest suite
// (tests/fuzz/fuzz_corpus_test.cpp, every seed and regression input once) call the same code.
//
// A target feeds the bytes to one reader the way mixlab reads that input (a spec string, a
// config file, a checkpoint file, a decode state, an LM token cache, an .npy/.npz, a nanoGPT
// .bin, a compare run record) and then uses what came back. The contract every parser keeps, and fuzz_run checks:
//   - the input is either accepted, or refused by a mixlab::Error whose message is one line;
//   - nothing else escapes (another exception type, a multi-line message): fuzz_run turns that
//     into a FuzzFinding, which libFuzzer reports as a crash (uncaught) and a test as a failure;
//   - crashes, leaks of bounds, undefined behaviour: AddressSanitizer/UBSan in the fuzz build.
//
// Targets that parse a file behind a checksum (checkpoint, decode state, compare record) run twice: on the bytes
// as given and, when the stored checksum is wrong, with it repaired, so mutations reach the
// parser behind the checksum instead of stopping at "checksum mismatch" (the checkpoint's only
// with MIXLAB_FUZZ_CHECKPOINT_ARCHIVE=1: file_targets.cpp says why).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mixlab::fuzz {

enum class FuzzOutcome { kAccepted, kRejected };

/// A broken contract (see the file header): not a rejection, a bug.
class FuzzFinding : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

struct FuzzTarget {
  const char* name;  // also the corpus folder: tests/fuzz/corpus/<name>/
  /// Feeds `bytes` to the parser; throws mixlab::Error when the input is refused.
  void (*feed)(std::string_view bytes);
};

/// Every target, in a fixed order.
const std::vector<FuzzTarget>& fuzz_targets();
/// The target called `name`; throws std::invalid_argument listing the names when there is none.
const FuzzTarget& fuzz_target(const std::string& name);

/// Runs `target` on `bytes`: kAccepted, or kRejected for a one-line mixlab::Error; throws
/// FuzzFinding for anything else.
FuzzOutcome fuzz_run(const FuzzTarget& target, std::string_view bytes);
/// The same check around one step of a target (`what` names it in a FuzzFinding): for a target
/// that reads more than one variant of its input.
FuzzOutcome fuzz_run_step(const std::string& what, const std::function<void()>& step);

// The targets (text_targets.cpp, file_targets.cpp, data_targets.cpp).
void fuzz_spec_args(std::string_view bytes);
void fuzz_mixer_spec(std::string_view bytes);
void fuzz_pattern(std::string_view bytes);
void fuzz_config(std::string_view bytes);
void fuzz_checkpoint(std::string_view bytes);
void fuzz_decode_state(std::string_view bytes);
void fuzz_lm_cache(std::string_view bytes);
void fuzz_npy(std::string_view bytes);
void fuzz_token_bin(std::string_view bytes);
void fuzz_compare_record(std::string_view bytes);

// Seeds written by mixlab's own writers (tests/fuzz/fuzz_corpus_test.cpp writes and checks them).
/// A checkpoint (checkpoint_write) of the small module fuzz_checkpoint loads into.
std::string fuzz_checkpoint_seed();
/// The specs fuzz_decode_state can load a state for (the format fixtures' mixers, dims 16/2/64).
const std::vector<std::string>& fuzz_decode_state_specs();
/// A decode state of `spec` (one of fuzz_decode_state_specs) after `steps` tokens.
std::string fuzz_decode_state_seed(const std::string& spec, int64_t steps);
/// An LM token cache (lm_cache_write) of `tokens` under the key fuzz_lm_cache expects.
std::string fuzz_lm_cache_seed(const std::vector<uint16_t>& tokens);
/// A compare run record (compare_run_record_write) of the config fuzz_compare_record expects.
std::string fuzz_compare_record_seed();

}  // namespace mixlab::fuzz
