// The fuzz target table and the contract check around every target (tests/fuzz/fuzz_target.h).
#include "fuzz/fuzz_target.h"

#include <exception>

#include "mixlab/core/error.h"

namespace mixlab::fuzz {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = {
      {"spec_args", fuzz_spec_args},   {"mixer_spec", fuzz_mixer_spec},
      {"pattern", fuzz_pattern},       {"config", fuzz_config},
      {"checkpoint", fuzz_checkpoint}, {"decode_state", fuzz_decode_state},
      {"lm_cache", fuzz_lm_cache},     {"npy", fuzz_npy},
      {"token_bin", fuzz_token_bin},   {"compare_record", fuzz_compare_record},
  };
  return targets;
}

const FuzzTarget& fuzz_target(const std::string& name) {
  std::string names;
  for (const FuzzTarget& t : fuzz_targets()) {
    if (name == t.name) return t;
    names += names.empty() ? t.name : std::string(", ") + t.name;
  }
  throw std::invalid_argument("fuzz target '" + name + "' does not exist; expected one of " + names);
}

FuzzOutcome fuzz_run_step(const std::string& what, const std::function<void()>& step) {
  try {
    step();
    return FuzzOutcome::kAccepted;
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find('\n') != std::string::npos)
      throw FuzzFinding(what + ": a rejection of more than one line: " + message);
    if (message.empty()) throw FuzzFinding(what + ": a rejection with an empty message");
    return FuzzOutcome::kRejected;
  } catch (const FuzzFinding&) {
    throw;
  } catch (const std::exception& e) {
    // Everything a parser refuses must be a mixlab::Error (exit 2/3 with one line), never a
    // library's own exception (std::out_of_range, nlohmann::json, c10::Error).
    throw FuzzFinding(what + ": an exception other than mixlab::Error escaped: " + e.what());
  }
}

FuzzOutcome fuzz_run(const FuzzTarget& target, std::string_view bytes) {
  return fuzz_run_step(target.name, [&] { target.feed(bytes); });
}

}  // namespace mixlab::fuzz
