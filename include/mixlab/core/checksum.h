// mixlab/core/checksum.h — a 64-bit checksum of a byte string (FNV-1a, 64-bit).
//
// Used to detect corruption of files mixlab wrote (checkpoints), not to resist tampering. Each
// step of FNV-1a (xor a byte, multiply by an odd constant) is a bijection of the state, so any
// change confined to one byte always changes the result; other changes collide with
// probability about 2^-64. Not a cryptographic hash.
#pragma once

#include <cstdint>
#include <string_view>

namespace mixlab {

/// FNV-1a 64 of `bytes`; `seed` continues a previous call (pass its result) for streaming.
inline uint64_t checksum64(std::string_view bytes, uint64_t seed = 0xcbf29ce484222325ULL) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace mixlab
