#include "lenient_scan.hpp"

#include <algorithm>
#include <exception>

#include "plan_json.hpp"

namespace cgemm::plan {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// s[i] is '"': the index just past the closing quote, or npos.
size_t skip_string(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The index just past the value starting at s[i] (strings, arrays and objects matched by
// brackets only; a scalar must be followed by something), or npos.
size_t skip_value(std::string_view s, size_t i) {
  if (i >= s.size()) return std::string_view::npos;
  if (s[i] == '"') return skip_string(s, i);
  if (s[i] == '{' || s[i] == '[') {
    size_t depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        i = skip_string(s, i);
        if (i == std::string_view::npos) return i;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      ++i;
    }
    return std::string_view::npos;
  }
  while (i < s.size() && !is_ws(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
  return i < s.size() ? i : std::string_view::npos;
}

bool key_is_id(std::string_view key) {
  if (key == "\"id\"") return true;
  if (key.find('\\') == std::string_view::npos) return false;
  try {
    const Json k = Json::parse(key);
    return k.is_string() && k.get_ref<const std::string&>() == "id";
  } catch (const std::exception&) {
    return false;
  }
}

// The text of the value of the top-level "id" key (the last one, as the parser keeps it)
// when the line is an object; scanned as far as the line allows.
std::optional<std::string_view> id_text(std::string_view s) {
  std::optional<std::string_view> found;
  size_t i = skip_ws(s, 0);
  if (i >= s.size() || s[i] != '{') return found;
  for (i = skip_ws(s, i + 1); i < s.size() && s[i] == '"'; i = skip_ws(s, i + 1)) {
    const size_t key_end = skip_string(s, i);
    if (key_end == std::string_view::npos) break;
    const std::string_view key = s.substr(i, key_end - i);
    i = skip_ws(s, key_end);
    if (i >= s.size() || s[i] != ':') break;
    i = skip_ws(s, i + 1);
    const size_t value_end = skip_value(s, i);
    if (value_end == std::string_view::npos) break;
    if (key_is_id(key)) found = s.substr(i, value_end - i);
    i = skip_ws(s, value_end);
    if (i >= s.size() || s[i] != ',') break;
  }
  return found;
}

// RFC 8259's number grammar.
bool is_json_number(std::string_view t) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > start;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i < t.size() && t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

}  // namespace

int nesting_depth(std::string_view s) {
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      i = skip_string(s, i);
      if (i == std::string_view::npos) break;
      --i;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

std::optional<std::string> recovered_id(std::string_view line) {
  const std::optional<std::string_view> text = id_text(line);
  if (!text) return std::nullopt;
  if (is_json_number(*text)) return std::string(*text);
  if (text->empty() || text->front() == '{' || text->front() == '[') return std::nullopt;
  try {
    return Json::parse(*text).dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace cgemm::plan
