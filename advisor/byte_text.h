// Human sizes for every report ("12.40 GiB", "852.53 MiB", "512 bytes"): the largest unit
// that keeps the number at or above 1, two decimals.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace oomcast::advisor {

inline std::string byte_text(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0, kGiB = kMiB * 1024.0;
  const char* sign = bytes < 0 ? "-" : "";
  double size = bytes < 0 ? -bytes : bytes;
  if (size >= kGiB) return fmt::format("{}{:.2f} GiB", sign, size / kGiB);
  if (size >= kMiB) return fmt::format("{}{:.2f} MiB", sign, size / kMiB);
  if (size >= kKiB) return fmt::format("{}{:.2f} KiB", sign, size / kKiB);
  return fmt::format("{}{} bytes", sign, static_cast<int64_t>(size));
}

inline std::string byte_text(uint64_t bytes) { return byte_text(static_cast<double>(bytes)); }
inline std::string byte_text(int64_t bytes) { return byte_text(static_cast<double>(bytes)); }

}  // namespace oomcast::advisor
