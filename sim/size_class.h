// Size classes of the caching allocator: how a request is rounded to a block size, which
// pool serves it, and how big a segment is requested from CUDA for it (spec §1).
#pragma once

#include <cstdint>

#include "sim/allocator_config.h"

namespace oomcast::sim {

inline constexpr uint64_t kMinBlockSize = 512;                // every block is a multiple of this
inline constexpr uint64_t kSmallSize = 1ull << 20;            // rounded size <= this: small pool
inline constexpr uint64_t kSmallBuffer = 2ull << 20;          // small-pool segment; small expandable page
inline constexpr uint64_t kMinLargeAlloc = 10ull << 20;       // below: a kLargeBuffer segment
inline constexpr uint64_t kLargeBuffer = 20ull << 20;         // large segment / page / oversize tolerance
inline constexpr uint64_t kRoundLarge = 2ull << 20;           // large segments round up to this
inline constexpr uint64_t kOneExbibyte = 1ull << 60;          // requests this big fail at once

// Index into roundup_power2_divisions for a byte size: floor(log2(size)) - 20, clamped to
// [0, 15], so index 0 covers everything below 2 MiB and index k covers [2^k, 2^(k+1)) MiB.
size_t roundup_division_index(uint64_t size);

// Rounds a request up to its block size (round_size in PyTorch). Mirrors the 2.3 quirk
// where a division count of 1 disables even the 512-byte rounding.
uint64_t round_size(uint64_t size, const AllocatorConfig& config);

// The power-of-two-division rounding on its own (roundup_power2_next_division).
uint64_t round_to_power2_division(uint64_t size, uint64_t divisions);

// True when a block of this rounded size is served by the small pool.
inline bool is_small_pool_size(uint64_t rounded_size) { return rounded_size <= kSmallSize; }

// The cudaMalloc size for a rounded request (get_allocation_size).
uint64_t get_allocation_size(uint64_t rounded_size);

}  // namespace oomcast::sim
