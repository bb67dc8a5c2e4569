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

// Accepts valid JSON whose numbers may lie beyond a double (ids keep their input text).
struct Syntax : nlohmann::json_sax<Json> {
  bool ok = true;
  int depth = 0;
  std::string first_key;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && first_key.empty()) first_key = k.empty() ? "<empty>" : k;
    return true;
  }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    ok = ex.id == 406;  // a 406 (number beyond a double) ends parsing: the text is JSON
    return false;
  }
};

std::string check_answer(const std::string& line) {
  if (line.size() > plan::kMaxAnswerBytes) return "answer longer than the limit";
  if (line.empty() || line.front() != '{' || line.back() != '}') return "not an object";
  if (line.rfind("{\"id\":", 0) != 0) return "\"id\" is not the first field";
  Syntax syntax;
  Json::sax_parse(line, &syntax);
  if (!syntax.ok) return "answer is not JSON";
  if (syntax.first_key != "id") return "\"id\" is not the first field";
  try {
    const Json a = Json::parse(line);
    if (a.contains("error")) {
      if (!a.at("error").is_string() || a.at("error").get<std::string>().empty()) {
        return "empty or non-string error";
      }
      if (a.size() != 2) return "an error answer with other fields";
    }
  } catch (const Json::out_of_range&) {
    // A number beyond a double, copied from the input: the syntax check above suffices.
  }
  return "";
}

}  // namespace

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
    if (std::string why = check_answer(line); !why.empty()) {
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
