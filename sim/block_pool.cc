// BlockPool: std::set with pooled nodes, because set inserts and erases are on the hot path
// of every malloc and free.
#include "sim/block_pool.h"

namespace oomcast::sim {

BlockPool::BlockPool(bool is_small)
    : is_small_(is_small), blocks_(&node_memory_), unmapped_(&node_memory_) {}

void BlockPool::insert(Block* block) {
  block->gc_count_base = get_free_blocks_call_count;
  blocks_.insert(block);
}

void BlockPool::erase(Block* block) { blocks_.erase(block); }

BlockPool::FreeSet::iterator BlockPool::lower_bound(uint64_t stream, uint64_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.address = 0;
  return blocks_.lower_bound(&key);
}

}  // namespace oomcast::sim
