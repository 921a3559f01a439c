// Small helpers shared by check families: readable lists and numbers in messages.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::checks {

// "a, b, c and 4 more" (at most `max` names shown).
std::string list_names(const std::vector<std::string>& names, size_t max = 5);
// "[10752, 320]"
std::string shape_str(const std::vector<uint64_t>& shape);
// "1.5 GiB (1610612736 bytes)"
std::string bytes_str(uint64_t n);
bool ends_with(std::string_view s, std::string_view suffix);
bool starts_with(std::string_view s, std::string_view prefix);

}  // namespace ckpt::checks
