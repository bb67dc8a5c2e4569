#pragma once
// A lenient scan of an input line's text, without building values: what cgemm-plan can
// still learn from a line it will not (or cannot) parse, such as one that is not JSON,
// too long, too deep, or holds a number beyond a double.

#include <optional>
#include <string>
#include <string_view>

namespace cgemm::plan {

/// What goes after "id": in the answer to `line`, taken from the value of the line's
/// top-level "id" key (the last one, as the parser keeps it), scanned as far as the line
/// allows: a number's input text unchanged, another scalar as JSON text; nullopt when the
/// id cannot be recovered, or is an array or object.
std::optional<std::string> recovered_id(std::string_view line);

/// The deepest nesting of arrays and objects, counting brackets outside strings.
int nesting_depth(std::string_view line);

}  // namespace cgemm::plan
