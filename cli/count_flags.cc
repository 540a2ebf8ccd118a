// Validators of counting flags (count_flags.h).
#include "cli/count_flags.h"

#include <charconv>
#include <cstdint>

namespace oomcast::cli {

CLI::Validator at_least_one(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (error != std::errc() || stop != end || value < 1) {
          return "must be a count of at least 1 (" + what + "); got '" + text + "'";
        }
        return {};
      },
      "N>=1");
}

}  // namespace oomcast::cli
