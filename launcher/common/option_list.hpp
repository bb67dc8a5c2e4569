#pragma once
// The comma-separated lists of the job programs' options: cgemm-run's sweep lists
// ("seq_len = 1024, 2048") and cgemm-bench's list options (--cases, --parts, --parts_tp), read
// by one rule so that a list means the same in both.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cgemm::launcher {

/// The items of `text`, split at commas, each without its leading and trailing blanks:
/// "a, b,c" -> {"a", "b", "c"}. An empty item ("a,,b", "a,", an empty or blank value) is
/// refused: throws OptionError "`described`: an empty value in the list ...", `described`
/// naming the option and where its value came from ("--cases tiny,"). At most `max_items`
/// items are split off (the rest is not read): the caller refuses a list that long.
std::vector<std::string> list_items(const std::string& text, const std::string& described,
                                    size_t max_items = SIZE_MAX);

}  // namespace cgemm::launcher
