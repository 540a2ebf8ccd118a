// Edit distance and "did you mean" suggestions for unknown keys, options and subcommands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oomcast {

// Levenshtein distance between two strings (insert, delete, substitute each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// Returns the candidate closest to `word` if it is close enough to be a plausible typo
// (distance at most max(2, |word|/3)), or an empty string.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace oomcast
