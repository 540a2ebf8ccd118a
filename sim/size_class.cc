// Request rounding and segment sizing, with the release differences of spec §1.2.
#include "sim/size_class.h"

#include <bit>

#include "sim/allocator_release_facts.h"

namespace oomcast::sim {

size_t roundup_division_index(uint64_t size) {
  if (size == 0) return 0;
  int log2_size = 63 - std::countl_zero(size);
  int index = log2_size - 20;
  if (index < 0) return 0;
  if (index > 15) return 15;
  return static_cast<size_t>(index);
}

uint64_t round_to_power2_division(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  uint64_t floor_power = std::bit_floor(size);
  uint64_t step = floor_power / divisions;
  if (step == 0) return floor_power * 2;
  if (size % step == 0) return size;
  return (size / step) * step + step;
}

uint64_t round_size(uint64_t size, const AllocatorConfig& config) {
  if (size < kMinBlockSize) return kMinBlockSize;
  uint64_t divisions = config.roundup_power2_divisions[roundup_division_index(size)];
  if (!allocator_release_facts(config.torch_version).roundup_one_division_rounds) {
    // 2.3 and earlier: any non-zero count goes to the division routine, which returns the
    // size unchanged for a count of 1 (the bug fixed by PR #126830).
    if (divisions > 0) {
      if (divisions <= 1 || size <= 4) return size;
      return round_to_power2_division(size, divisions);
    }
  } else if (divisions > 1 && size > kMinBlockSize * divisions) {
    return round_to_power2_division(size, divisions);
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

uint64_t get_allocation_size(uint64_t rounded_size) {
  if (rounded_size <= kSmallSize) return kSmallBuffer;
  if (rounded_size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded_size + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace oomcast::sim
