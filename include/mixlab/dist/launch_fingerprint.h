// mixlab/dist/launch_fingerprint.h — what every rank of a data-parallel launch must share, and the
// comparison that says which field differs.
//
//   LaunchFingerprint f{{"executable", executable_identity()}, {"WORLD_SIZE", "2"}};
//   fingerprint_add_json(f, "config.", config_to_json(config));
//   DataParallel dp(env, timeout, bucket_bytes, f);   // refuses a launch whose ranks differ
//
// Why. Ranks started with different configs or builds do not fail cleanly on their own: a
// different d_model breaks the first broadcast deep inside Gloo, a different `steps` leaves one
// rank waiting for a collective that never comes until the timeout, and a different seed trains
// on inconsistent batches without any error at all. So at rendezvous every rank publishes its
// fingerprint through the store, reads every other rank's and refuses to train, before the first
// step, naming each field that differs and both values (DataParallel's constructor).
//
// The build identity (executable_identity) is the size and FNV-1a 64 checksum of the running
// executable's file plus the mixlab and LibTorch versions it was compiled with: two different
// binaries are refused even at the same version number, and the same binary installed at two
// paths is accepted (the path is not part of it).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace mixlab {

/// Field name -> value text, compared exactly. Ordered by name, so reports are deterministic.
using LaunchFingerprint = std::map<std::string, std::string>;

/// "mixlab 0.1.0, LibTorch 1.13.0, executable of N bytes, FNV-1a 64 0x...": computed once per
/// process (reads /proc/self/exe; tens of milliseconds for the CLI). Throws IoError when the
/// executable cannot be read.
std::string executable_identity();

/// Adds every key of the JSON object `object` as the field "<prefix><key>", its value as compact
/// JSON text. Throws mixlab::Error when `object` is not an object.
void fingerprint_add_json(LaunchFingerprint& fingerprint, const std::string& prefix, const nlohmann::json& object);

/// The fingerprint as JSON text (what travels through the store) and back. fingerprint_from_text
/// throws mixlab::Error naming `origin` when the text is not a JSON object of strings.
std::string fingerprint_to_text(const LaunchFingerprint& fingerprint);
LaunchFingerprint fingerprint_from_text(const std::string& text, const std::string& origin);

/// Empty when `a` (of rank `rank_a`) and `b` (of rank `rank_b`) are equal; otherwise every field
/// that differs (at most `max_fields`, then "and N more"), each as
/// "'config.d_model': rank 0 has 16, rank 1 has 32". A field one side lacks is "(absent)".
std::string fingerprint_difference(const LaunchFingerprint& a, int64_t rank_a, const LaunchFingerprint& b,
                                   int64_t rank_b, size_t max_fields = 4);

}  // namespace mixlab
