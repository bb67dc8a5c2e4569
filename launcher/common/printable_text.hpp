#pragma once
// What the user typed or wrote, made safe to show in a one-line message: a config file's
// bytes reach the terminal, so a NUL would cut the message (C strings end there), an escape
// byte could drive the terminal, and a byte-order mark or a control byte would be invisible.

#include <string>
#include <string_view>

namespace cgemm::launcher {

/// `text` with every control byte (below 0x20, 0x7F, NUL included), every byte that is not
/// part of valid UTF-8, and the invisible UTF-8 characters (C1 controls, the byte-order mark
/// U+FEFF, zero-width and direction marks) written as \xNN, one per byte: "a\0b" -> "a\x00b",
/// a BOM -> "\xEF\xBB\xBF", ESC -> "\x1b". Printable ASCII and visible UTF-8 stay as they are.
/// Applying it twice gives what applying it once does, so a message built from messages can
/// pass through it again.
std::string printable(std::string_view text);

}  // namespace cgemm::launcher
