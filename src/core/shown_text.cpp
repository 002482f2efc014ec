// Text from input files as error messages quote it (mixlab/core/shown_text.h).
#include "mixlab/core/shown_text.h"

#include <fmt/format.h>

namespace mixlab {

namespace {
bool is_control(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c < 0x20 || c == 0x7f;
}
}  // namespace

size_t control_byte_offset(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (is_control(text[i])) return i;
  return std::string_view::npos;
}

std::string shown_text(std::string_view text, size_t max_chars) {
  std::string out;
  const std::string_view kept = text.substr(0, max_chars);
  for (char ch : kept) {
    const auto c = static_cast<unsigned char>(ch);
    if (is_control(ch))
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  if (kept.size() < text.size()) out += "...";
  return out;
}

}  // namespace mixlab
