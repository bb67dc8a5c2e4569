// Fuzz target (a): cgemm-plan's line handler. Built as a libFuzzer binary with
// CGEMM_FUZZ_MAIN defined (tests/fuzz/fuzz_tests.cmake), and into test_fuzz_regressions.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "fuzz_checks.hpp"
#include "line_protocol.hpp"
#include "plan_json.hpp"

namespace cgemm::fuzz {

namespace {

using plan::Json;

// One pass over an answer (a second, DOM parse cost as much as answering): valid JSON
// whose numbers may lie beyond a double (ids keep their input text), its first key, and
// what an error answer must hold. Parsing stops at a number beyond a double (a 406); what
// follows it is then not checked, as a DOM parse could not read it either.
struct AnswerShape : nlohmann::json_sax<Json> {
  bool ok = true;
  int depth = 0;
  std::string first_key;
  int top_keys = 0;
  int errors = 0;               // "error" keys at the top
  bool error_is_text = true;    // every "error" a non-empty string
  bool value_is_error = false;  // the next top-level value is an "error"'s

  // A value at the top level (depth 1, before a nested object or array counts itself).
  void top_value(bool non_empty_string) {
    if (depth == 1 && value_is_error && !non_empty_string) error_is_text = false;
    if (depth == 1) value_is_error = false;
  }
  bool null() override { return top_value(false), true; }
  bool boolean(bool) override { return top_value(false), true; }
  bool number_integer(number_integer_t) override { return top_value(false), true; }
  bool number_unsigned(number_unsigned_t) override { return top_value(false), true; }
  bool number_float(number_float_t, const string_t&) override { return top_value(false), true; }
  bool string(string_t& s) override { return top_value(!s.empty()), true; }
  bool binary(binary_t&) override { return top_value(false), true; }
  bool start_object(std::size_t) override { return top_value(false), ++depth, true; }
  bool key(string_t& k) override {
    if (depth != 1) return true;
    if (first_key.empty()) first_key = k.empty() ? "<empty>" : k;
    ++top_keys;
    value_is_error = k == "error";
    errors += value_is_error;
    return true;
  }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return top_value(false), ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    ok = ex.id == 406;  // a 406 (number beyond a double) ends parsing: the text is JSON
    return false;
  }
};

}  // namespace

std::string check_plan_answer(const std::string& line) {
  if (line.size() > plan::kMaxAnswerBytes) return "answer longer than the limit";
  if (line.empty() || line.front() != '{' || line.back() != '}') return "not an object";
  if (line.rfind("{\"id\":", 0) != 0) return "\"id\" is not the first field";
  AnswerShape shape;
  Json::sax_parse(line, &shape);
  if (!shape.ok) return "answer is not JSON";
  if (shape.first_key != "id") return "\"id\" is not the first field";
  if (shape.errors > 0) {
    if (!shape.error_is_text) return "empty or non-string error";
    if (shape.top_keys != 2) return "an error answer with other fields";
  }
  return "";
}

std::string check_plan_lines(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::istringstream in(input);
  std::ostringstream out, err;
  plan::run_plan_lines(in, out, err);

  size_t cases = 0;  // non-blank lines, as run_plan_lines counts them
  std::istringstream lines(input);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > plan::kMaxLineBytes) line.resize(plan::kMaxLineBytes + 1);  // as read
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t\f\v") != std::string::npos) ++cases;
  }
  const std::string answers = out.str();
  if (!answers.empty() && answers.back() != '\n') return "last answer without a newline";
  const auto n = static_cast<size_t>(std::count(answers.begin(), answers.end(), '\n'));
  if (n != cases) {
    return std::to_string(cases) + " non-blank lines but " + std::to_string(n) + " answers";
  }
  std::istringstream answer_lines(answers);
  for (std::string line; std::getline(answer_lines, line);) {
    if (std::string why = check_plan_answer(line); !why.empty()) {
      return why + ": " + line.substr(0, 200);
    }
  }
  return "";
}

}  // namespace cgemm::fuzz

#ifdef CGEMM_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = cgemm::fuzz::check_plan_lines(data, size);
  if (!why.empty()) {
    std::fprintf(stderr, "fuzz_plan_line: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
#endif
