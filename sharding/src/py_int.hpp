#pragma once
// Python's int() of a str, private to the planner: gemm.py reads an environment variable
// with bool(int(value)), and a value int() refuses is the seed's ValueError.

#include <optional>
#include <string_view>

namespace cgemm::detail {

/// Whether int(text) is non-zero, or nullopt when int(text) raises ValueError. `text` is
/// UTF-8. CPython's rules (Objects/unicodeobject.c _PyUnicode_TransformDecimalAndSpaceToASCII,
/// Objects/longobject.c PyLong_FromString): every non-ASCII whitespace becomes ' ' and every
/// Unicode decimal digit its ASCII digit; then ASCII whitespace (\t \n \v \f \r and space)
/// around an optional sign and base-10 digits with single '_' between digits; at most 4300
/// digits (the default sys.get_int_max_str_digits()). An embedded NUL ends the number, so
/// it refuses the text.
std::optional<bool> py_int_is_nonzero(std::string_view text);

}  // namespace cgemm::detail
