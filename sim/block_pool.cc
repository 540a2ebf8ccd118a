// BlockPool: a std::set whose nodes are recycled through the blocks, because set inserts
// and erases are on the hot path of every malloc and free.
#include "sim/block_pool.h"

namespace oomcast::sim {

BlockPool::BlockPool(bool is_small)
    : is_small_(is_small) {}

void BlockPool::insert(Block* block) {
  block->gc_count_base = get_free_blocks_call_count;
  if (block->spare_node) {
    block->spare_node.value() = FreeBlockEntry(block);
    block->pool_entry = blocks_.insert(std::move(block->spare_node)).position;
  } else {
    block->pool_entry = blocks_.insert(FreeBlockEntry(block)).first;
  }
  block->in_pool = true;
}

void BlockPool::erase(Block* block) {
  if (!block->in_pool) return;
  block->spare_node = blocks_.extract(block->pool_entry);
  block->in_pool = false;
}

BlockPool::FreeSet::iterator BlockPool::lower_bound(uint64_t stream, uint64_t size) {
  return blocks_.lower_bound(FreeBlockEntry(stream, size, 0));
}

}  // namespace oomcast::sim
