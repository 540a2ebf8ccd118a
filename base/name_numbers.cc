// with_same_numbers(); see name_numbers.h.
#include "base/name_numbers.h"

#include <cctype>

namespace oomcast {

namespace {

std::vector<std::string> numbers_of(std::string_view text) {
  std::vector<std::string> numbers;
  char letter = 0;  // the last letter seen before the current run of digits
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!std::isdigit(c)) {
      if (std::isalpha(c)) letter = static_cast<char>(std::tolower(c));
      ++i;
      continue;
    }
    std::string number(1, letter);
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) number += text[i++];
    numbers.push_back(number);
    letter = 0;
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
