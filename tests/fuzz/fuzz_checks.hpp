#pragma once
// The checks behind the fuzz targets, as plain functions: the libFuzzer entry points
// (fuzz_plan_line.cpp, fuzz_run_config.cpp) abort when one fails, and the unit test
// test_fuzz_regressions.cpp replays the saved inputs through the same functions.

#include <cstddef>
#include <cstdint>
#include <string>

namespace cgemm::fuzz {

/// Feeds `data` to cgemm-plan's line protocol (run_plan_lines): one answer per non-blank
/// line, each a JSON object with "id" first and either result fields or a non-empty
/// "error", within the answer size limit. "" when all holds, else what failed.
std::string check_plan_lines(const uint8_t* data, size_t size);

/// The check of one answer line of check_plan_lines: a JSON object, "id" first, and an
/// "error" (if any) a non-empty string beside the id only. "" when all holds, else why not.
std::string check_plan_answer(const std::string& line);

/// Parses `data` as cgemm-run's INI file (--config), as cgemm-run does: only OptionError
/// may come out; a config that parses must survive to_ini and back unchanged.
/// "" when all holds, else what failed.
std::string check_run_config(const uint8_t* data, size_t size);

}  // namespace cgemm::fuzz
