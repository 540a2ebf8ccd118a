// Rounding and segment sizing, with expected values worked out from spec §1 by hand.
#include "sim/size_class.h"

#include <catch2/catch.hpp>

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;
AllocatorConfig with_divisions(uint64_t divisions, int version = 206) {
  AllocatorConfig config;
  config.roundup_power2_divisions.fill(divisions);
  config.torch_version = version;
  return config;
}
}  // namespace

TEST_CASE("round_size rounds a 1-byte request up to 512", "[sim][rounding]") {
  CHECK(round_size(1, AllocatorConfig{}) == 512);
}

TEST_CASE("round_size rounds up to a multiple of 512 by default", "[sim][rounding]") {
  AllocatorConfig config;
  CHECK(round_size(512, config) == 512);
  CHECK(round_size(513, config) == 1024);
  CHECK(round_size(1000, config) == 1024);
  // 1,048,577 = 2048 * 512 + 1 -> 2049 * 512 = 1,049,088, which is above 1 MiB: large pool.
  CHECK(round_size(1048577, config) == 1049088);
}

TEST_CASE("four divisions leave a 1200-byte request to plain 512 rounding", "[sim][rounding]") {
  // 1200 is not above 512 * 4 = 2048, so the division routine is skipped: 1536, not 1280.
  CHECK(round_size(1200, with_divisions(4)) == 1536);
}

TEST_CASE("four divisions round 5,000,000 bytes to the next quarter of 4 MiB", "[sim][rounding]") {
  // floor power of two = 4 MiB, step = 1 MiB; 5,000,000 / 1 MiB = 4.77 -> 5 MiB.
  CHECK(round_size(5000000, with_divisions(4)) == 5 * MiB);
  CHECK(round_size(4 * MiB, with_divisions(4)) == 4 * MiB);
}

TEST_CASE("in 2.3 a division count of one disables the 512-byte rounding", "[sim][rounding]") {
  CHECK(round_size(1000, with_divisions(1, 203)) == 1000);
  CHECK(round_size(1000, with_divisions(1, 204)) == 1024);
}

TEST_CASE("the division table index is floor(log2 size) - 20, clamped", "[sim][rounding]") {
  CHECK(roundup_division_index(1000) == 0);
  CHECK(roundup_division_index(2 * MiB - 1) == 0);
  CHECK(roundup_division_index(2 * MiB) == 1);
  CHECK(roundup_division_index(1024 * MiB) == 10);
  CHECK(roundup_division_index(1ull << 40) == 15);
}

TEST_CASE("exactly 1 MiB is small pool and one byte more is large", "[sim][rounding]") {
  CHECK(is_small_pool_size(MiB));
  CHECK_FALSE(is_small_pool_size(round_size(MiB + 1, AllocatorConfig{})));
}

TEST_CASE("segment sizes are 2 MiB, 20 MiB, or the request rounded to 2 MiB", "[sim][segment]") {
  CHECK(get_allocation_size(512) == 2 * MiB);
  CHECK(get_allocation_size(MiB) == 2 * MiB);
  CHECK(get_allocation_size(2 * MiB) == 20 * MiB);
  CHECK(get_allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(get_allocation_size(10 * MiB) == 10 * MiB);
  CHECK(get_allocation_size(11 * MiB) == 12 * MiB);
  CHECK(get_allocation_size(19 * MiB + MiB / 2) == 20 * MiB);
}
