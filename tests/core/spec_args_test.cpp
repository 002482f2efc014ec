// SpecArgs, the one spec-argument grammar: splitting, keys, aliases, positional items, typed
// getters with ranges, and the error for every malformed form.
#include "mixlab/core/spec_args.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace spec_args_test {

using mixlab::SpecArgs;

TEST(SpecArgs, ReadsKeysAliasesAndPositionalItems) {
  const SpecArgs a("mixer spec 'f:band:8:c=3:mode=fast:r=0.25'", "f", "band:8:chunk=3:mode=fast:r=0.25",
                   {"c|chunk", "mode", "r", "unused"}, 2);
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"band", "8"}));
  EXPECT_TRUE(a.has("c"));
  EXPECT_FALSE(a.has("chunk"));  // an alias is stored under its key
  EXPECT_FALSE(a.has("unused"));
  EXPECT_EQ(a.integer("c", 0, 1, 10), 3);
  EXPECT_EQ(a.integer("unused", 42, 1, 10), 42);  // absent: the fallback
  EXPECT_EQ(a.choice("mode", {"slow", "fast"}, 0), 1u);
  EXPECT_DOUBLE_EQ(a.real("r", 0, 0, 1), 0.25);
  EXPECT_EQ(a.positional_integer(1, "width", 0, 1, 100), 8);
  EXPECT_EQ(a.positional_integer(2, "third", 7, 1, 100), 7);
  EXPECT_EQ(a.text("mode"), "fast");
  const SpecArgs empty("ctx", "f", "", {"k"});
  EXPECT_FALSE(empty.has("k"));
  EXPECT_TRUE(empty.positional().empty());
}

TEST(SpecArgs, EveryMalformedFormIsOneErrorNamingTheContext) {
  auto bad = [](const std::string& args, const std::string& what, size_t positional = 0) {
    expect_error(
        [&] {
          SpecArgs("mixer spec 'f:" + args + "'", "f", args, {"k", "n|num"}, positional);
        },
        {"mixer spec 'f:" + args + "': " + what});
  };
  bad("k=1:", "f arguments have an empty item (a ':' with nothing after it)");
  bad("k=1::n=2", "f arguments have an empty item (a ':' with nothing before it)");
  bad(":k=1", "f arguments have an empty item");
  bad("x=1", "unknown f key 'x'; known: k, n");
  bad("k=1:k=2", "f key 'k' is given twice");
  bad("n=1:num=2", "f key 'n' is given twice");
  bad("k=", "f key 'k' has an empty value");
  bad("=3", "f item '=3' has no key before '='");
  bad("8", "f arguments are key=value items (keys: k, n), got '8'");
  bad("8:9", "f takes at most 1 argument without '=', got '9'", 1);
  expect_error([] { SpecArgs("ctx", "g", "3", {}); }, "ctx: g takes no arguments, got '3'");
}

TEST(SpecArgs, GettersCheckTheirRanges) {
  const SpecArgs a("ctx", "f", "i=0:r=2:c=maybe:p=-4", {"i", "r", "c", "p"});
  expect_error([&] { a.integer("i", 1, 1, 9); }, "ctx: f key 'i' must be a positive integer in [1, 9], got 0");
  expect_error([&] { a.real("r", 0, 0, 1); }, "ctx: f key 'r' must be a number in [0, 1], got 2");
  expect_error(
      [&] {
        a.choice("c", {"yes", "no", "never"}, 0);
      },
      "ctx: f key 'c' must be yes, no or never, got 'maybe'");
  EXPECT_EQ(a.integer("p", 0, -5, 5), -4);
  expect_error([&] { a.integer("p", 0, -3, 5); },
               "ctx: f key 'p' must be an integer in [-3, 5], got -4 (out of range)");
}

// Found by the spec_args fuzzer (tests/fuzz/corpus/spec_args/crash-newline-in-arguments.txt):
// "w=:c\n" was refused by a message quoting the item and the spec with the newline, two lines.
// Arguments with a control byte are refused first, and mixer_spec_context escapes the spec.
TEST(SpecArgs, ControlCharactersAreRefusedOnOneLine) {
  const std::string args = "w=:c\n";
  try {
    SpecArgs(mixlab::mixer_spec_context("fam:" + args), "fam", args, {"w", "c"});
    ADD_FAILURE() << "a control character was accepted";
  } catch (const mixlab::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m,
              "mixer spec 'fam:w=:c\\x0a': fam arguments have a control character (byte 0x0a) at offset 4; "
              "expected printable text");
  }
}

}  // namespace spec_args_test
