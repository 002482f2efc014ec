// A model's per-layer mixer list (mixlab/registry/layer_specs.h): what it expands to, what it
// refuses and with which message, and that no registered family's own spec uses '|' or '*'.
#include "mixlab/registry/layer_specs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixlab/registry/registry.h"
#include "support/expect_error.h"
#include "support/mixer_specs.h"

namespace layer_specs_test {

namespace {

using mixlab::mixer_layer_specs;
using Specs = std::vector<std::string>;

}  // namespace

TEST(LayerSpecs, ExpandsItemsRepeatsAndWholeLists) {
  // A plain spec (no '|' or '*') is every layer's, exactly as before lists existed.
  EXPECT_EQ(mixer_layer_specs("ssm", 3), (Specs{"ssm", "ssm", "ssm"}));
  EXPECT_EQ(mixer_layer_specs("brl:w=8:m=8", 2), (Specs{"brl:w=8:m=8", "brl:w=8:m=8"}));
  EXPECT_EQ(mixer_layer_specs("resolvent:pow2+cache:gate=0.5", 1), (Specs{"resolvent:pow2+cache:gate=0.5"}));
  EXPECT_EQ(mixer_layer_specs("ssm*3|attention", 4), (Specs{"ssm", "ssm", "ssm", "attention"}));
  EXPECT_EQ(mixer_layer_specs("ssm|attention", 4), (Specs{"ssm", "attention", "ssm", "attention"}));
  EXPECT_EQ(mixer_layer_specs("ssm|attention", 2), (Specs{"ssm", "attention"}));
  EXPECT_EQ(mixer_layer_specs("local:4*2", 4), (Specs{"local:4", "local:4", "local:4", "local:4"}));
  EXPECT_EQ(mixer_layer_specs("brl:w=8:m=4|attention*2", 6),
            (Specs{"brl:w=8:m=4", "attention", "attention", "brl:w=8:m=4", "attention", "attention"}));
  EXPECT_EQ(mixer_layer_specs("ssm*1", 1), (Specs{"ssm"}));
  // The list as written: items and counts; a plain spec is one item.
  const auto items = mixlab::mixer_layer_list("gla*3|attention", 8);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].spec, "gla");
  EXPECT_EQ(items[0].count, 3);
  EXPECT_EQ(items[1].spec, "attention");
  EXPECT_EQ(items[1].count, 1);
  EXPECT_EQ(mixlab::mixer_layer_list("ssm", 1000000000).size(), 1u);  // nothing is expanded
  EXPECT_TRUE(mixlab::mixer_spec_is_layer_list("ssm*2"));
  EXPECT_TRUE(mixlab::mixer_spec_is_layer_list("ssm|local"));
  EXPECT_FALSE(mixlab::mixer_spec_is_layer_list("brl:w=8:m=8"));
}

TEST(LayerSpecs, RefusesBadListsNamingTheWholeSpec) {
  auto bad = [](const std::string& spec, int64_t layers, const std::vector<std::string>& what) {
    SCOPED_TRACE(spec);
    std::vector<std::string> fragments = {"mixer spec '" + spec + "': "};
    fragments.insert(fragments.end(), what.begin(), what.end());
    expect_error([&] { (void)mixer_layer_specs(spec, layers); }, fragments);
  };
  bad("ssm*3|attention", 2, {"the list names 4 layers, more than the model's layers = 2", "expected at most 2"});
  bad("ssm|ssm|attention", 4,
      {"the list names 3 layers, which does not divide the model's layers = 4",
       "expected a list length that divides 4"});
  bad("ssm*0", 4, {"the repeat count N of layer item 'ssm*0' (after '*') must be a positive integer", "got 0"});
  bad("ssm*x|attention", 2, {"the repeat count N of layer item 'ssm*x'", "got 'x'"});
  bad("ssm*", 2, {"the repeat count N of layer item 'ssm*'", "got ''"});
  bad("ssm*2*2", 4, {"layer item 'ssm*2*2'", "got '2*2'"});
  bad("ssm*-1", 2, {"layer item 'ssm*-1'", "got '-1'"});
  bad("ssm*99999999", 2, {"must be a positive integer in [1, 16777216], got 99999999"});
  bad("*3", 3, {"layer item '*3' has no mixer spec before '*'"});
  bad("ssm|", 2, {"layer item 2 is empty", "after the last '|'"});
  bad("|ssm", 2, {"layer item 1 is empty", "before the first '|'"});
  bad("ssm||attention", 3, {"layer item 2 is empty", "between '|'"});
  bad("ssm|attention", 0, {"the model's layer count must be >= 1, got 0"});
  bad("", 2, {"the mixer spec is empty"});
  // Every message is one line.
  try {
    (void)mixer_layer_specs("ssm|", 2);
    ADD_FAILURE() << "no error";
  } catch (const mixlab::Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(LayerSpecs, ChecksEveryMemberThroughTheRegistry) {
  const auto dims = mixlab::testing::small_mixer_dims();
  EXPECT_NO_THROW(mixlab::check_mixer_layer_specs("ssm*3|attention", 4, dims));
  EXPECT_NO_THROW(mixlab::check_mixer_layer_specs("brl:w=4:m=2|local:4", 2, dims));
  // Nothing is expanded: a huge layer count costs one check per member.
  EXPECT_NO_THROW(mixlab::check_mixer_layer_specs("ssm*2|attention", 300000000, dims));
  EXPECT_NO_THROW(mixlab::check_mixer_layer_specs("ssm", 1000000000, dims));
  // A member's own error, prefixed with the whole list and the member's first layer.
  expect_error([&] { mixlab::check_mixer_layer_specs("ssm|bogus", 4, dims); },
               {"mixer spec 'ssm|bogus': layer 1: mixer spec 'bogus': unknown family 'bogus'"});
  expect_error([&] { mixlab::check_mixer_layer_specs("attention*2|local:0", 3, dims); },
               {"mixer spec 'attention*2|local:0': layer 2: mixer spec 'local:0': "});
  // A plain spec keeps check_mixer_spec's message, unprefixed.
  expect_error([&] { mixlab::check_mixer_layer_specs("bogus", 4, dims); }, {"mixer spec 'bogus': unknown family"});
  // The list's grammar is checked before any member.
  expect_error([&] { mixlab::check_mixer_layer_specs("bogus|ssm|ssm", 4, dims); },
               {"mixer spec 'bogus|ssm|ssm': the list names 3 layers"});
}

TEST(LayerSpecs, OneMixerRefusesAListAndNoFamilyUsesItsCharacters) {
  const auto dims = mixlab::testing::small_mixer_dims();
  expect_error([&] { (void)mixlab::mixer_create("ssm|attention", dims); },
               {"mixer spec 'ssm|attention': a per-layer list", "one mixer takes one spec, e.g. 'ssm'"});
  expect_error([&] { mixlab::check_mixer_spec("ssm*2", dims); }, {"mixer spec 'ssm*2': a per-layer list"});
  expect_error([&] { mixlab::check_mixer_spec("*2", dims); }, {"mixer spec '*2': a per-layer list", "e.g. 'ssm'"});
  // '|' and '*' appear in no registered spec (the table's specs and every family's usage line
  // apart from its alternatives "a|b", which are documentation, not spec text).
  for (const auto& spec : mixlab::testing::mixer_specs_under_test()) {
    SCOPED_TRACE(spec);
    EXPECT_FALSE(mixlab::mixer_spec_is_layer_list(spec));
    EXPECT_EQ(mixer_layer_specs(spec, 2), (Specs{spec, spec}));
  }
}

// Found by the mixer_spec fuzzer (tests/fuzz/corpus/mixer_spec/crash-control-bytes-in-layer-list.txt):
// a layer list with control bytes was refused by a message quoting its items raw, over two lines.
TEST(LayerSpecs, ControlCharactersAreRefusedOnOneLine) {
  try {
    (void)mixlab::mixer_layer_list("ssm*2|lo\ncal", 4);
    ADD_FAILURE() << "a control character was accepted";
  } catch (const mixlab::Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "mixer spec 'ssm*2|lo\\x0acal': has a control character (byte 0x0a) at offset 8; expected printable text");
  }
}

}  // namespace layer_specs_test
