// Byte-size parsing: binary units (KiB, MiB, GiB, TiB), decimal units (KB, MB, GB, TB) and
// byte counts with a B (1048576B); a number without a unit is refused, never read as bytes.
#include "base/byte_size.h"

#include <cmath>
#include <cstdlib>

#include "base/input_error.h"

namespace oomcast {

uint64_t parse_byte_size(const std::string& text, const std::string& option) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = 0;
  if (end != text.c_str() && unit.empty()) {
    // "80" is far more often 80 GiB meant than 80 bytes: a unit is required.
    throw InputError({}, option,
                              option + ": '" + text + "' has no unit: write " + text + "GiB, " + text + "MiB or " +
                                  text + "B for bytes");
  }
  if (unit == "B") scale = 1;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  if (end == text.c_str() || scale == 0 || !(value >= 0) || value * scale > 1.8e19)
    throw InputError({}, option,
                              option + ": '" + text + "' is not a byte size (examples: 80GiB, 40GB, 512MiB, 1048576B)");
  return static_cast<uint64_t>(std::llround(value * scale));
}

}  // namespace oomcast
