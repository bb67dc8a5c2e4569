#include "printable_text.hpp"

#include <cstdint>

namespace cgemm::launcher {

namespace {

// The length of the valid UTF-8 sequence at `s[i]` (2 to 4) and its code point; 0 when the
// bytes there are not one (a stray continuation byte, a truncated or overlong sequence, a
// surrogate or a code point above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = b(0);
  size_t n = 0;
  uint32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2, cp = lead & 0x1Fu, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3, cp = lead & 0x0Fu, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4, cp = lead & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b(k) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Characters a terminal shows as nothing (or that reorder the text around them).
bool invisible(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF ||
         (cp >= 0xFFF9 && cp <= 0xFFFB);
}

void hex_byte(std::string& out, unsigned char c) {
  // Upper case for the bytes of UTF-8 (\xEF\xBB\xBF, as editors show a BOM), lower for ASCII
  // controls (\x1b, as shells write ESC): the way each is usually seen.
  const char* digits = c >= 0x80 ? "0123456789ABCDEF" : "0123456789abcdef";
  out += "\\x";
  out += digits[c >> 4];
  out += digits[c & 0xF];
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = c >= 0x80 ? utf8_sequence(text, i, cp) : 0;
    if (n > 0 && !invisible(cp)) {
      out.append(text.substr(i, n));
    } else {
      for (size_t k = 0; k < (n > 0 ? n : 1); ++k) {
        hex_byte(out, static_cast<unsigned char>(text[i + k]));
      }
    }
    i += n > 0 ? n : 1;
  }
  return out;
}

}  // namespace cgemm::launcher
