#pragma once
// cgemm-plan's line protocol: read a line, answer it with one line, whatever the line
// holds. Kept apart from the tool's main so tests answer lines through exactly the code the
// tool runs.

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace cgemm::plan {

/// How the process keeps answering when memory runs out; cgemm-plan's main sets a reserve
/// aside (cgemm_plan.cpp), tests and fuzzers pass none. `rearm` runs before each line;
/// `checkpoint` runs where a case may stop with std::bad_alloc and unwind safely (the
/// case is then answered with an error).
class MemoryPolicy {
 public:
  virtual ~MemoryPolicy() = default;
  virtual void rearm() noexcept = 0;
  virtual void checkpoint() = 0;
};

/// The answer to one input line.
struct LineAnswer {
  std::string text;      // one JSON object, without the newline
  std::string not_json;  // non-empty when the line is not (or was not read as) JSON: why
};

/// Answers one non-blank input line (without its newline); `lineno` is for messages only.
/// Never throws: a line beyond a limit, a number out of the range of a double, an
/// allocation failure, ... all give an error answer. The "id" of the answer is the case's,
/// copied unchanged (a number keeps its input text), recovered from a line that cannot be
/// parsed into a case when possible, else null.
LineAnswer answer_line(std::string_view line, size_t lineno = 0,
                       MemoryPolicy* memory = nullptr) noexcept;

/// cgemm-plan's exit statuses beyond 0 and 1 (a line not JSON).
inline constexpr int kExitInputUnreadable = 2;  // as bad arguments: the input is unusable
inline constexpr int kExitOutputLost = 3;       // answers that could not be written

/// The cgemm-plan protocol: one answer line per non-blank input line. A line that is not
/// JSON (or longer than kMaxLineBytes) is answered with an error too (so answers stay
/// aligned with lines), reported on `err`, and makes the return value 1; otherwise 0. An
/// answer that cannot be written (`out` failed after the flush of its line) ends the loop
/// with kExitOutputLost, input that cannot be read with kExitInputUnreadable; either is
/// reported on `err` in one line.
int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err,
                   MemoryPolicy* memory = nullptr);

/// "<what>: <strerror(errno_value)>", for a stream that failed.
std::string stream_failure(const std::string& what, int errno_value);

}  // namespace cgemm::plan
