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

// A statistic kept for all pools together and for each of the two pools. Every PyTorch
// update moves the aggregate and one pool by the same amount, so the aggregate is the sum of
// the pools' slots; only its peak, which the sum does not give, is stored. That halves the
// work of the updates, which run several times per malloc and free.
struct StatArray {
  std::array<Stat, 2> pools;  // small, large
  int64_t all_peak = 0;

  Stat all() const {
    return Stat{pools[0].current + pools[1].current, all_peak, pools[0].allocated + pools[1].allocated,
                pools[0].freed + pools[1].freed};
  }
  Stat& pool(bool is_small) { return pools[is_small ? 0 : 1]; }
  const Stat& pool(bool is_small) const { return pools[is_small ? 0 : 1]; }
  void increase(bool is_small, int64_t amount) {
    pool(is_small).increase(amount);
    int64_t total = pools[0].current + pools[1].current;
    if (total > all_peak) all_peak = total;
  }
  void decrease(bool is_small, int64_t amount) { pool(is_small).decrease(amount); }
  // reset_peak_memory_stats: every peak to its current value.
  void reset_peaks() {
    for (Stat& stat : pools) stat.peak = stat.current;
    all_peak = pools[0].current + pools[1].current;
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
