#pragma once
// An answer line of cgemm-plan as a value, and its one serialization.

#include <optional>
#include <string>

#include "plan_json.hpp"

namespace cgemm::plan {

/// {"id": ..., <result fields>} or {"id": ..., "error": "..."}, "id" first. An id copied
/// from the input as text (`id_text`, e.g. from recovered_id) is written in place of the
/// value of "id": a number keeps its input text, which a Json cannot hold (nlohmann prints
/// 1e2 as 100.0, and integers past 64 bits as doubles).
struct Answer {
  Json object;
  std::optional<std::string> id_text;
};

/// {"id": null, "error": why}, or with `id_text` as the id; a long `why` is cut at 1000
/// bytes.
Answer error_answer(std::optional<std::string> id_text, std::string why);

/// The answer's JSON text, compact, without a newline; invalid UTF-8 in strings becomes
/// U+FFFD.
std::string answer_text(const Answer& a);

}  // namespace cgemm::plan
