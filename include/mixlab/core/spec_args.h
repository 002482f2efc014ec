// mixlab/core/spec_args.h — the one grammar of spec arguments: "<family>:<item>:<item>...".
//
// Every mixer family (and the pattern kinds) reads the text after "<family>:" through SpecArgs,
// so every family has the same rules and the same error style:
//   - items are separated by ':'; an empty item (a trailing ':', '::', a leading ':') is an error;
//   - an item with '=' is `key=value`: the key must be one the family knows (an alias such as
//     tpsm's chunk for c counts as the same key), given at most once, with a non-empty value;
//   - an item without '=' is positional: allowed only up to the family's count;
//   - values are read by typed getters with ranges (integers, reals, one of a list of words).
// Every error is a mixlab::Error "<context>: <family> <what is wrong>", where the context names
// the whole spec, e.g. "mixer spec 'brl:w=0': brl key 'w' must be a positive integer in [1, ...], got 0".
//
// What this is not: the registry's split of "<family>:<args>" (mixlab/registry/registry.h), and
// what a value means (each family's options struct).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mixlab {

/// The largest integer a spec argument takes (windows, slots, state sizes, chunks): far above
/// any useful size, and small enough that products of two stay in int64.
constexpr int64_t kSpecMaxInt = int64_t{1} << 24;

class SpecArgs {
 public:
  /// `context`: the start of every message, e.g. "mixer spec 'brl:w=8'". `family`: the name the
  /// messages give the keys ("brl key 'w'"). `args`: the text to split (may be empty). `keys`:
  /// the known keys; "c|chunk" declares `chunk` an alias of `c`. `max_positional`: how many
  /// items without '=' are allowed.
  SpecArgs(std::string context, std::string family, const std::string& args, std::initializer_list<const char*> keys,
           size_t max_positional = 0);

  /// Whether `key` (or an alias of it) was given.
  bool has(const std::string& key) const;
  /// The raw value of `key`; `fallback` when absent.
  std::string text(const std::string& key, const std::string& fallback = "") const;
  /// An integer in [lo, hi]; `fallback` when absent (not range-checked).
  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  /// A finite real in [lo, hi]; `fallback` when absent.
  double real(const std::string& key, double fallback, double lo, double hi) const;
  /// The index in `choices` of the value; `fallback` when absent. The error lists the choices.
  size_t choice(const std::string& key, std::initializer_list<const char*> choices, size_t fallback) const;

  /// The positional items, in order.
  const std::vector<std::string>& positional() const { return positional_; }
  /// Positional item `i` as an integer in [lo, hi], named `what` in errors; `fallback` when absent.
  int64_t positional_integer(size_t i, const std::string& what, int64_t fallback, int64_t lo, int64_t hi) const;

  /// The message prefix, "<context>: <family> key '<key>'", for checks a family adds itself.
  std::string key_context(const std::string& key) const;
  const std::string& context() const { return context_; }

 private:
  const std::string* find(const std::string& key) const;

  std::string context_;
  std::string family_;
  std::vector<std::pair<std::string, std::string>> values_;  // canonical key -> value
  std::vector<std::string> positional_;
};

/// "mixer spec '<spec>'": the context of every mixer family's messages.
std::string mixer_spec_context(const std::string& spec);

}  // namespace mixlab
