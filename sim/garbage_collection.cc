// Reclaiming cached memory before a cudaMalloc: garbage_collection_threshold (spec §3.4)
// and release_available_cached_blocks for max_split_size_mb (spec §3.5).
#include <vector>

#include "sim/caching_allocator.h"

namespace oomcast::sim {

void CachingAllocator::garbage_collect_cached_blocks() {
  auto gc_threshold = static_cast<uint64_t>(config_.garbage_collection_threshold *
                                            static_cast<double>(allowed_memory_maximum()));
  auto reserved = static_cast<uint64_t>(stats_.reserved_bytes.all().current);
  if (reserved <= gc_threshold) return;
  uint64_t target = reserved - gc_threshold;

  // Only wholly free, non-expandable segments of the large pool are candidates.
  auto is_candidate = [](const Block* block) { return !block->is_split() && !block->expandable; };
  auto age = [this](const Block* block) {
    return static_cast<double>(large_pool_.get_free_blocks_call_count - block->gc_count_base);
  };
  double total_age = 0.0;
  size_t freeable = 0;
  for (const Block* block : large_pool_.blocks().in_order()) {
    if (is_candidate(block)) {
      total_age += age(block);
      ++freeable;
    }
  }
  if (freeable == 0) return;

  uint64_t reclaimed = 0;
  bool freed_something = true;
  // Free the older half (age >= mean) each pass, the whole pass even past the target.
  while (reclaimed < target && freed_something && freeable > 0) {
    double age_threshold = total_age / static_cast<double>(freeable);
    freed_something = false;
    std::vector<Block*> victims;
    for (Block* block : large_pool_.blocks().in_order())
      if (is_candidate(block) && age(block) >= age_threshold) victims.push_back(block);
    for (Block* block : victims) {
      freed_something = true;
      reclaimed += block->size;
      total_age -= age(block);
      --freeable;
      release_block(block);
    }
  }
}

bool CachingAllocator::release_available_cached_blocks(BlockPool& pool, uint64_t stream, uint64_t size) {
  if (config_.max_split_size == AllocatorConfig::kUnlimited) return false;
  uint64_t key_size = size < config_.max_split_size ? config_.max_split_size : size;
  auto releasable = [&](const Block* block) { return !block->expandable && !block->is_split(); };
  if (Block* found = pool.lower_bound(stream, key_size)) {
    if (!releasable(found)) return false;
    release_block(found);
    return true;
  }
  // No single block is big enough: free oversize blocks from the largest down until the
  // released total reaches the key. Blocks released before a false return stay released.
  Block* block = pool.blocks().last_before(stream, key_size);
  uint64_t released = 0;
  std::vector<Block*> victims;
  while (block && released < key_size && block->size >= config_.max_split_size && block->stream == stream) {
    if (releasable(block)) {
      victims.push_back(block);
      released += block->size;
    }
    block = pool.blocks().prev(block);
  }
  for (Block* block : victims) release_block(block);
  return released >= key_size;
}

}  // namespace oomcast::sim
