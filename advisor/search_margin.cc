// parse_search_margin(); see search_margin.h.
#include "advisor/search_margin.h"

#include <cmath>
#include <cstdlib>

#include "base/byte_size.h"
#include "base/input_error.h"

namespace oomcast::advisor {

SearchMargin parse_search_margin(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  bool percent = end && *end == '%';
  if (end != text.c_str() && (*end == '\0' || (percent && end[1] == '\0'))) {
    if (!std::isfinite(value)) {  // nan would compare false everywhere and answer "nothing fits"
      throw InputError(SourceLocation{}, flag, flag + " must be a number in [0%, 100%); got '" + text + "'");
    }
    return SearchMargin{percent ? value / 100.0 : value, 0};
  }
  try {
    return SearchMargin{0.0, parse_byte_size(text, flag)};
  } catch (const InputError&) {
    throw InputError(SourceLocation{}, flag,
                     flag + " must be a fraction (0.05), a percentage (5%) or an amount (2GiB, 512MiB); got '" + text +
                         "'");
  }
}

}  // namespace oomcast::advisor
