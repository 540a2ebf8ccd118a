// The margin a search leaves free, as the user writes it: a fraction ("0.05"), a percentage
// ("5%") or an amount ("2GiB"). Read the same way by `oomcast search --margin` and by
// oomcast.search(margin=...) in Python.
#pragma once

#include <cstdint>
#include <string>

namespace oomcast::advisor {

struct SearchMargin {
  double fraction = 0.0;  // of usable memory
  uint64_t bytes = 0;     // an absolute amount (fraction is then 0)
};

// Throws InputError naming `flag` when `text` is neither a fraction, a percentage nor an amount.
SearchMargin parse_search_margin(const std::string& text, const std::string& flag = "--margin");

}  // namespace oomcast::advisor
