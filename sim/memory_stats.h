// MemoryStats: the counters of torch.cuda.memory_stats(), keyed by the same names
// ("allocated_bytes.all.current", "num_alloc_retries", ...).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace oomcast::sim {

// One statistic: current value, its peak, and the sums of increases and decreases.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  void increase(int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
};

// Index into a StatArray, in PyTorch's internal order (AGGREGATE, SMALL_POOL, LARGE_POOL).
enum class StatType : uint8_t { All = 0, SmallPool = 1, LargePool = 2 };

// A statistic kept for all pools together and for each of the two pools.
struct StatArray {
  std::array<Stat, 3> slots;
  Stat& all() { return slots[0]; }
  const Stat& all() const { return slots[0]; }
  Stat& pool(bool is_small) { return slots[is_small ? 1 : 2]; }
  const Stat& pool(bool is_small) const { return slots[is_small ? 1 : 2]; }
  // Updates `all` and the pool's slot together, as every PyTorch update does.
  void increase(bool is_small, int64_t amount) {
    slots[0].increase(amount);
    pool(is_small).increase(amount);
  }
  void decrease(bool is_small, int64_t amount) {
    slots[0].decrease(amount);
    pool(is_small).decrease(amount);
  }
};

struct MemoryStats {
  StatArray allocation;
  StatArray segment;
  StatArray active;
  StatArray inactive_split;
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;
  Stat oversize_allocations;
  Stat oversize_segments;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  int64_t max_split_size = -1;  // -1 when unlimited, as memory_stats() reports it

  // The flattened, sorted dict torch.cuda.memory_stats() returns.
  std::map<std::string, int64_t> as_flat_map() const;
};

}  // namespace oomcast::sim
