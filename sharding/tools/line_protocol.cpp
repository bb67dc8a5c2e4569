#include "line_protocol.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <istream>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "json_release.hpp"
#include "lenient_scan.hpp"
#include "plan_answer.hpp"
#include "plan_json.hpp"
#include "plan_schema.hpp"

namespace cgemm::plan {

namespace {

// Only checks the syntax (iteratively, at any depth); records how it fails.
struct SyntaxCheck : nlohmann::json_sax<Json> {
  int error_id = 0;  // 0: valid; 406: a number out of range; other: not JSON
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error_id = ex.id;
    message = ex.what();
    return false;
  }
};

void checkpoint(MemoryPolicy* memory) {
  if (memory) memory->checkpoint();
}

std::string line_name(size_t lineno) {
  return lineno ? "line " + std::to_string(lineno) : std::string("the line");
}

// A line that is not JSON (or not read): answered with a null id, and reported.
LineAnswer not_json(std::optional<std::string> id_text, const std::string& why) {
  return {answer_text(error_answer(std::move(id_text), why)), why};
}

LineAnswer error_line(std::optional<std::string> id_text, std::string why) {
  return {answer_text(error_answer(std::move(id_text), std::move(why))), ""};
}

// A line nested past kMaxDepth is not parsed into values (the parser recurses); a syntax
// check tells a deep case from a line that is not JSON.
LineAnswer answer_too_deep(std::string_view line, size_t lineno) {
  SyntaxCheck check;
  Json::sax_parse(line, &check);
  if (check.error_id != 0 && check.error_id != 406) {
    return not_json(std::nullopt, line_name(lineno) + " is not JSON: " + check.message);
  }
  return error_line(recovered_id(line), "the case nests arrays and objects deeper than " +
                                            cap_name("depth", kMaxDepth, "levels"));
}

// The answer to a parsed case, within kMaxAnswerBytes.
LineAnswer answer_parsed(const Json& c, std::string_view line, MemoryPolicy* memory) {
  Answer answer{answer_case(c), std::nullopt};
  const ReleaseOnExit release_answer(answer.object);
  checkpoint(memory);
  if (c.is_object() && c.contains("id") && c.at("id").is_number()) {
    answer.id_text = recovered_id(line);
  }
  std::string text = answer_text(answer);
  checkpoint(memory);
  if (text.size() > kMaxAnswerBytes) {
    const Json& id = answer.object.at("id");
    Answer too_long = error_answer(
        answer.id_text, "the answer is " + std::to_string(text.size()) + " bytes long, more than " +
                            cap_name("answer size", kMaxAnswerBytes, "bytes"));
    if (!answer.id_text && id.is_primitive()) too_long.object["id"] = id;
    return {answer_text(too_long), ""};
  }
  return {std::move(text), ""};
}

LineAnswer answer_line_or_throw(std::string_view line, size_t lineno, MemoryPolicy* memory) {
  if (line.size() > kMaxLineBytes) {
    return not_json(recovered_id(line), line_name(lineno) + " is longer than " +
                                            cap_name("line length", kMaxLineBytes, "bytes") +
                                            "; not read");
  }
  // nlohmann's lexer takes a NUL for the end of the input: the rest of the line was ignored.
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
    return not_json(std::nullopt, line_name(lineno) + " is not JSON: a NUL byte at byte " +
                                      std::to_string(nul + 1));
  }
  if (nesting_depth(line) > kMaxDepth) return answer_too_deep(line, lineno);
  Json c;
  const ReleaseOnExit release_case(c);
  try {
    c = Json::parse(line, [memory](int, Json::parse_event_t, Json&) {
      checkpoint(memory);
      return true;
    });
  } catch (const Json::parse_error& e) {
    return not_json(std::nullopt, line_name(lineno) + " is not JSON: " + e.what());
  } catch (const Json::out_of_range& e) {
    // Valid JSON, but a number beyond a double's range (nlohmann refuses it).
    return error_line(recovered_id(line),
                      std::string("a number is out of the range of a double: ") + e.what());
  }
  checkpoint(memory);
  return answer_parsed(c, line, memory);
}

// Reads one line (without its newline) into `line`, keeping at most kMaxLineBytes + 1
// bytes of it; false at the end of the input, or when it cannot be read (badbit set, the
// errno in `read_errno`: libstdc++'s file buffer throws on a read error, a folder or a
// closed descriptor as stdin).
bool read_line(std::istream& in, std::string& line, int& read_errno) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  bool any = false;
  for (;;) {
    int c = 0;
    try {
      c = buf->sbumpc();
    } catch (...) {
      read_errno = errno;
      in.setstate(std::ios::badbit);
      return false;
    }
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (line.size() <= kMaxLineBytes) line.push_back(static_cast<char>(c));
  }
}

// The answer when answering threw. Memory may be short: first with the id, then without,
// then a fixed text.
LineAnswer answer_after_failure(std::string_view line, const char* why) noexcept {
  try {
    return error_line(recovered_id(line), why);
  } catch (...) {
  }
  try {
    return error_line(std::nullopt, why);
  } catch (...) {
  }
  LineAnswer last;
  try {
    last.text = R"({"id":null,"error":"out of memory"})";
  } catch (...) {
  }
  return last;
}

}  // namespace

LineAnswer answer_line(std::string_view line, size_t lineno, MemoryPolicy* memory) noexcept {
  try {
    return answer_line_or_throw(line, lineno, memory);
  } catch (const std::bad_alloc&) {
    return answer_after_failure(line, "out of memory while answering the case");
  } catch (const std::exception& e) {
    return answer_after_failure(line, e.what());
  } catch (...) {
    return answer_after_failure(line, "unknown error");
  }
}

int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err, MemoryPolicy* memory) {
  int status = 0;
  // read_line never allocates. The buffer outlives the call: a caller that runs many
  // protocols (the fuzzer, tests) pays for the megabyte once per thread, not per call.
  thread_local std::string line;
  line.reserve(kMaxLineBytes + 1);
  int read_errno = 0;
  for (size_t lineno = 1; read_line(in, line, read_errno); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t\f\v") == std::string::npos) continue;
    if (memory) memory->rearm();  // again, after a case that ran out of memory
    const LineAnswer answer = answer_line(line, lineno, memory);
    if (!answer.not_json.empty()) {
      err << "cgemm-plan: " << answer.not_json << '\n';
      status = 1;
    }
    out << answer.text << '\n';
    out.flush();
    if (!out) {
      err << "cgemm-plan: " << stream_failure("cannot write to standard output", errno) << '\n';
      return kExitOutputLost;
    }
  }
  if (in.bad()) {
    err << "cgemm-plan: " << stream_failure("cannot read standard input", read_errno) << '\n';
    return kExitInputUnreadable;
  }
  return status;
}

std::string stream_failure(const std::string& what, int errno_value) {
  return what + ": " + (errno_value ? std::strerror(errno_value) : "an I/O error");
}

}  // namespace cgemm::plan
