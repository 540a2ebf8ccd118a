// check_invariants(): the expensive self-check, run after every event of every test replay.
// It recomputes from the block lists what the stats and pools claim.
#include <sstream>
#include <unordered_set>

#include "sim/caching_allocator.h"

namespace oomcast::sim {

std::string CachingAllocator::check_invariants() const {
  std::ostringstream problem;
  int64_t reserved[2] = {0, 0};
  int64_t allocated[2] = {0, 0};
  int64_t segments[2] = {0, 0};
  int64_t inactive_split_bytes[2] = {0, 0};
  int64_t inactive_split_count[2] = {0, 0};
  std::unordered_set<const Block*> free_blocks;
  for (const Block* head : segment_heads()) {
    int small = head->pool->is_small() ? 0 : 1;
    if (!head->expandable) segments[small] += 1;
    uint64_t expected_address = head->address;
    for (const Block* block = head; block; block = block->next) {
      if (block->address != expected_address) {
        problem << "block at " << block->address << " is not contiguous with its predecessor";
        return problem.str();
      }
      expected_address += block->size;
      if (block->size % 512 != 0) {
        problem << "block at " << block->address << " has size " << block->size << ", not a multiple of 512";
        return problem.str();
      }
      if (block->next && block->next->prev != block) {
        problem << "broken prev link after block at " << block->address;
        return problem.str();
      }
      if (block->mapped) reserved[small] += static_cast<int64_t>(block->size);
      if (block->allocated) {
        allocated[small] += static_cast<int64_t>(block->size);
      } else if (block->pending_free) {
        // waits for its events: neither allocated nor cached
      } else if (block->mapped) {
        free_blocks.insert(block);
        if (!block->expandable && block->is_split()) {
          inactive_split_bytes[small] += static_cast<int64_t>(block->size);
          inactive_split_count[small] += 1;
        }
        if (block->next && !block->next->allocated && !block->next->pending_free && block->next->mapped) {
          problem << "adjacent free blocks at " << block->address << " and " << block->next->address
                  << " were not merged";
          return problem.str();
        }
      }
    }
  }
  size_t pooled = 0;
  for (const BlockPool* pool : all_pools()) {
    for (const Block* block : pool->blocks().in_order()) {
      ++pooled;
      if (block->allocated || !free_blocks.count(block)) {
        problem << "pool holds a block at " << block->address << " that is not a free block of any segment";
        return problem.str();
      }
    }
  }
  if (pooled != free_blocks.size()) {
    problem << "pools hold " << pooled << " blocks but segments have " << free_blocks.size() << " free blocks";
    return problem.str();
  }
  const char* pool_names[2] = {"small", "large"};
  for (int small = 0; small < 2; ++small) {
    bool is_small = small == 0;
    auto check = [&](const char* name, int64_t expected, int64_t actual) {
      if (expected != actual && problem.str().empty())
        problem << name << " of the " << pool_names[small] << " pool is " << actual << " but the blocks say "
                << expected;
    };
    check("reserved_bytes", reserved[small], stats_.reserved_bytes.pool(is_small).current);
    check("allocated_bytes", allocated[small], stats_.allocated_bytes.pool(is_small).current);
    check("segment", segments[small], stats_.segment.pool(is_small).current);
    check("inactive_split_bytes", inactive_split_bytes[small], stats_.inactive_split_bytes.pool(is_small).current);
    check("inactive_split", inactive_split_count[small], stats_.inactive_split.pool(is_small).current);
  }
  for (const auto& [id, pool] : private_pools_) {
    int64_t owned = 0;
    for (const Block* head : segment_heads())
      if (head->pool->owner() == pool.get()) owned += 1;
    if (owned != pool->segment_count && problem.str().empty())
      problem << "private pool " << id << " counts " << pool->segment_count << " segments but owns " << owned;
  }
  return problem.str();
}

}  // namespace oomcast::sim
