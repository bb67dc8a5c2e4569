#include "plan_answer.hpp"

#include <utility>

namespace cgemm::plan {

namespace {

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

Answer error_answer(std::optional<std::string> id_text, std::string why) {
  if (why.size() > 1000) why = why.substr(0, 1000) + "...";
  return {Json{{"id", nullptr}, {"error", std::move(why)}}, std::move(id_text)};
}

std::string answer_text(const Answer& a) {
  // Member by member, as nlohmann writes a compact object, so that "id" can be the input's
  // text.
  std::string text = "{";
  for (auto it = a.object.begin(); it != a.object.end(); ++it) {
    if (it != a.object.begin()) text += ',';
    text += dump(it.key());
    text += ':';
    text += it.key() == "id" && a.id_text ? *a.id_text : dump(it.value());
  }
  text += '}';
  return text;
}

}  // namespace cgemm::plan
