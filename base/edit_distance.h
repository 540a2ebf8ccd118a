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

// The candidates whose numbers are the word's: in names of models and GPUs a number is the
// identity ('llama33-70b' is no misspelt 'llama-2-70b', nor 'b200' an 'h200'), so only those
// are offered as typos. Numbers are runs of digits with the letter before them ("b200", "a100",
// "x3090" from "rtx-3090"; punctuation between is skipped), compared in order.
std::vector<std::string> with_same_numbers(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace oomcast
