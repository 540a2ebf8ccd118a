// The numbers in a model's or a GPU's name, which are its identity: a did-you-mean offers only
// names with the same numbers, so 'llama33-70b' never becomes 'llama-2-70b' nor 'b200' 'h200'.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oomcast {

// The candidates whose numbers are the word's: in names of models and GPUs a number is the
// identity ('llama33-70b' is no misspelt 'llama-2-70b', nor 'b200' an 'h200'), so only those
// are offered as typos. Numbers are runs of digits, with the letter before them when it stands
// alone ("b200", "a100"; "3090" from "rtx-3090", "2" from "gpt2"; punctuation between is skipped),
// compared in order.
std::vector<std::string> with_same_numbers(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace oomcast
