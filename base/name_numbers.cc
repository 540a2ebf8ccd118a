// with_same_numbers(); see name_numbers.h.
#include "base/name_numbers.h"

#include <cctype>

namespace oomcast {

namespace {

std::vector<std::string> numbers_of(std::string_view text) {
  std::vector<std::string> numbers;
  char letter = 0;       // the last letter seen before the current run of digits
  size_t letter_run = 0;  // the length of the run of letters it ends
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!std::isdigit(c)) {
      if (std::isalpha(c)) {
        const bool continues_run = i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1]));
        letter_run = continues_run ? letter_run + 1 : 1;
        letter = static_cast<char>(std::tolower(c));
      }
      ++i;
      continue;
    }
    // A lone letter is part of the number ('b200' is not 'h200'); the end of a word is not
    // ('gtp2' is a misspelt 'gpt2').
    std::string number = letter_run == 1 ? std::string(1, letter) : std::string();
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) number += text[i++];
    numbers.push_back(number);
    letter = 0;
    letter_run = 0;
  }
  return numbers;
}

}  // namespace

std::vector<std::string> with_same_numbers(std::string_view word, const std::vector<std::string>& candidates) {
  const std::vector<std::string> wanted = numbers_of(word);
  std::vector<std::string> same;
  for (const std::string& candidate : candidates) {
    if (numbers_of(candidate) == wanted) same.push_back(candidate);
  }
  return same;
}

}  // namespace oomcast
