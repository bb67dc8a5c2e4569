#include "py_int.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace cgemm::detail {

namespace {

// The first code point (digit zero) of each run of ten Unicode decimal digits (category Nd)
// beyond ASCII, as of Unicode 15.0 (CPython 3.12): Python's int() reads each as its digit.
constexpr std::array<uint32_t, 67> kDecimalZeros{
    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,   0xC66,
    0xCE6,   0xD66,   0xDE6,   0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,  0x1810,
    0x1946,  0x19D0,  0x1A80,  0x1A90,  0x1B50,  0x1BB0,  0x1C40,  0x1C50,  0xA620,  0xA8D0,
    0xA900,  0xA9D0,  0xA9F0,  0xAA50,  0xABF0,  0xFF10,  0x104A0, 0x10D30, 0x11066, 0x110F0,
    0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950,
    0x11C50, 0x11D50, 0x11DA0, 0x11F50, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2,
    0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E950, 0x1FBF0,
};

// Python's str.isspace() beyond ASCII (Py_UNICODE_ISSPACE): int() strips these like spaces.
bool is_unicode_space(uint32_t c) {
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int unicode_decimal(uint32_t c) {
  for (const uint32_t zero : kDecimalZeros) {
    if (c >= zero && c < zero + 10) return static_cast<int>(c - zero);
  }
  return -1;
}

// Decodes one UTF-8 code point at text[i], advancing i; false for an invalid sequence.
bool next_code_point(std::string_view text, size_t& i, uint32_t& c) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int extra = 0;
  if (b0 < 0x80) {
    c = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    c = b0 & 0x1Fu, extra = 1;
  } else if ((b0 & 0xF0) == 0xE0) {
    c = b0 & 0x0Fu, extra = 2;
  } else if ((b0 & 0xF8) == 0xF0) {
    c = b0 & 0x07u, extra = 3;
  } else {
    return false;
  }
  ++i;
  for (int k = 0; k < extra; ++k, ++i) {
    if (i >= text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) return false;
    c = (c << 6) | (static_cast<unsigned char>(text[i]) & 0x3Fu);
  }
  return true;
}

bool is_ascii_space(char ch) {
  // Py_ISSPACE: only these; \x1c-\x1f are str.isspace() but int() refuses them.
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

constexpr int64_t kMaxStrDigits = 4300;  // CPython's default int_max_str_digits

}  // namespace

std::optional<bool> py_int_is_nonzero(std::string_view text) {
  // _PyUnicode_TransformDecimalAndSpaceToASCII: ASCII below 127 is kept, other whitespace
  // becomes ' ', other decimal digits their ASCII digit, anything else ends the text with
  // a '?' (so the parse below fails).
  std::string ascii;
  for (size_t i = 0; i < text.size();) {
    uint32_t c = 0;
    if (!next_code_point(text, i, c)) return std::nullopt;
    if (c < 127) {
      ascii += static_cast<char>(c);
    } else if (is_unicode_space(c)) {
      ascii += ' ';
    } else if (const int d = unicode_decimal(c); d >= 0) {
      ascii += static_cast<char>('0' + d);
    } else {
      return std::nullopt;
    }
  }
  // PyLong_FromString with base 10, which must consume the whole text.
  size_t i = 0;
  while (i < ascii.size() && is_ascii_space(ascii[i])) ++i;
  if (i < ascii.size() && (ascii[i] == '+' || ascii[i] == '-')) ++i;
  if (i >= ascii.size() || !(ascii[i] >= '0' && ascii[i] <= '9')) return std::nullopt;
  int64_t digits = 0;
  bool nonzero = false;
  char prev = 0;
  for (; i < ascii.size(); ++i) {
    const char ch = ascii[i];
    if (ch == '_') {
      if (prev == '_') return std::nullopt;  // one underscore at a time
    } else if (ch >= '0' && ch <= '9') {
      ++digits;
      nonzero = nonzero || ch != '0';
    } else {
      break;
    }
    prev = ch;
  }
  if (prev == '_') return std::nullopt;  // no trailing underscore
  if (digits > kMaxStrDigits) return std::nullopt;
  while (i < ascii.size() && is_ascii_space(ascii[i])) ++i;
  if (i != ascii.size()) return std::nullopt;  // trailing text, or an embedded NUL
  return nonzero;
}

}  // namespace cgemm::detail
