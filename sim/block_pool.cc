// BlockPool: the free-block index plus garbage-collection age stamps.
#include "sim/block_pool.h"

namespace oomcast::sim {

BlockPool::BlockPool(bool is_small, PrivatePool* owner)
    : is_small_(is_small), owner_(owner) {}

void BlockPool::insert(Block* block) {
  block->gc_count_base = get_free_blocks_call_count;
  blocks_.insert(block);
  block->in_pool = true;
}

void BlockPool::erase(Block* block) {
  if (!block->in_pool) return;
  blocks_.erase(block);
  block->in_pool = false;
}

}  // namespace oomcast::sim
