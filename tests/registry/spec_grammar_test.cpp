// The one spec grammar (mixlab/core/spec_args.h) as every registered family sees it: an unknown
// key, a key given twice, a key with an empty value and a trailing ':' are refused by every
// family with the same message, which names the whole spec. The family list comes from the
// registry, so a new family is covered without editing this test; it only needs one valid item.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mixlab/registry/registry.h"
#include "support/expect_error.h"
#include "support/mixer_specs.h"

namespace spec_grammar_test {

namespace {

// One valid argument item per family: a key=value where the family has keys, else its
// positional argument ("" = the family takes no arguments).
struct FamilyItem {
  std::string item;
  bool keyed;
};

FamilyItem valid_item(const std::string& family) {
  static const std::map<std::string, FamilyItem> items = {
      {"attention", {"", false}},      {"local", {"4", false}},
      {"ssm", {"4", false}},           {"resolvent", {"gate=0.5", true}},
      {"toeplitz", {"heads=2", true}}, {"tpsm", {"c=2", true}},
      {"brl", {"w=4", true}}};
  const auto it = items.find(family);
  return it != items.end() ? it->second : FamilyItem{"16", false};  // the affine members: a chunk size
}

void expect_spec_error(const std::string& spec, const std::string& what) {
  expect_error([&] { mixlab::check_mixer_spec(spec, mixlab::testing::small_mixer_dims()); },
               {"mixer spec '" + spec + "': " + what});
}

}  // namespace

TEST(SpecGrammar, EveryFamilyRefusesBadItemsInOneStyle) {
  for (const auto& info : mixlab::mixer_families()) {
    const std::string& f = info.family;
    SCOPED_TRACE(f);
    const FamilyItem v = valid_item(f);
    // The resolvent family needs its pattern before any option.
    const std::string base = f == "resolvent" ? "resolvent:dense" : (v.item.empty() ? f : f + ":" + v.item);
    ASSERT_NO_THROW(mixlab::check_mixer_spec(base, mixlab::testing::small_mixer_dims())) << base;
    expect_spec_error(base + ":bogus=1", "unknown " + f + " key 'bogus'; known: ");
    // A trailing ':' after the arguments (the registry refuses a bare "<family>:" the same way).
    expect_spec_error(v.item.empty() ? f + ":" : base + ":",
                      v.item.empty() ? "nothing after ':'" : f + " arguments have an empty item");
    expect_spec_error(base + "::" + (v.item.empty() ? "x" : v.item), f + " arguments have an empty item");
    if (v.keyed) {
      const std::string key = v.item.substr(0, v.item.find('='));
      const std::string keyed = f == "resolvent" ? base + ":" + v.item : base;
      expect_spec_error(keyed + ":" + v.item, f + " key '" + key + "' is given twice");
      expect_spec_error(f + (f == "resolvent" ? ":dense:" : ":") + key + "=",
                        f + " key '" + key + "' has an empty value");
    }
  }
}

TEST(SpecGrammar, NumbersAndChoicesNameTheKeyAndTheRange) {
  expect_spec_error("brl:w=0", "brl key 'w' must be a positive integer in [1, 16777216], got 0");
  expect_spec_error("tpsm:c=x", "tpsm key 'c' must be a positive integer, got 'x'");
  expect_spec_error("tpsm:chunk=2:c=3", "tpsm key 'c' is given twice");  // chunk is c's alias
  expect_spec_error("toeplitz:kernel=99999999999", "toeplitz key 'kernel' must be a positive integer in [1, ");
  expect_spec_error("brl:attn=gelu", "brl key 'attn' must be softmax, laplace or relu2, got 'gelu'");
  expect_spec_error("local:8:9", "local takes at most 1 argument without '=', got '9'");
  expect_spec_error("gla:0", "chunk must be a positive integer in [1, 999999], got 0");
  expect_spec_error("resolvent:band:4:gate=2", "resolvent key 'gate' must be a number in [0, 1], got 2");
}

}  // namespace spec_grammar_test
