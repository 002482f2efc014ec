// shown_text (mixlab/core/shown_text.h): file text quoted in a message stays on one line and short.
#include "mixlab/core/shown_text.h"

#include <gtest/gtest.h>

namespace mixlab {
namespace shown_text_test {
namespace {

TEST(ShownText, ControlBytesAreEscapedAndLongTextIsCut) {
  EXPECT_EQ(shown_text("<i8"), "<i8");
  EXPECT_EQ(shown_text(std::string("a\nb\0c\x7f", 6)), "a\\x0ab\\x00c\\x7f");
  EXPECT_EQ(shown_text("tab\there", 3), "tab...");
  EXPECT_EQ(shown_text(std::string(200, 'x')).size(), 123u);
  EXPECT_EQ(shown_text(""), "");
}

}  // namespace
}  // namespace shown_text_test
}  // namespace mixlab
