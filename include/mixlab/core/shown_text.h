// mixlab/core/shown_text.h — text from an input file as an error message quotes it.
//
// Messages are one line (docs/RELIABILITY.md), and parts of them come from the files being
// refused: an .npy header, a dtype, a zip entry's name. A line break or a control byte in such
// text would split the message or print binary, and a megabyte-long header would drown it, so
// every message that quotes file text goes through shown_text: control bytes (< 0x20 and 0x7f)
// become \xNN, and text past `max_chars` is cut with "...". Text that must be printable (a spec)
// is refused up front instead, at control_byte_offset.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mixlab {

/// `text` on one line and at most `max_chars` input bytes long (see the file header).
std::string shown_text(std::string_view text, size_t max_chars = 120);

/// The offset of the first control byte (< 0x20 or 0x7f) in `text`; std::string_view::npos when
/// there is none.
size_t control_byte_offset(std::string_view text);

}  // namespace mixlab
