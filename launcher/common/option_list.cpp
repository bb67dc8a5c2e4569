#include "option_list.hpp"

#include "option_sources.hpp"
#include "option_table.hpp"

namespace cgemm::launcher {

std::vector<std::string> list_items(const std::string& text, const std::string& described,
                                    size_t max_items) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (true) {
    if (items.size() == max_items) return items;
    const size_t comma = text.find(',', begin);
    items.push_back(trim(std::string_view(text).substr(
        begin, comma == std::string::npos ? std::string::npos : comma - begin)));
    if (items.back().empty()) {
      throw OptionError(described + ": an empty value in the list (lists are 'A, B, C')");
    }
    if (comma == std::string::npos) return items;
    begin = comma + 1;
  }
}

}  // namespace cgemm::launcher
