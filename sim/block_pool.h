// BlockPool: one pool's cached (free, mapped) blocks in best-fit order, plus the unmapped
// ranges of its expandable segments. Mirrors BlockPool and BlockComparatorSize in PyTorch's
// CUDACachingAllocator.cpp: ordered by stream, then size, then address (FreeBlockIndex).
#pragma once

#include <cstdint>
#include <set>

#include "sim/block.h"
#include "sim/free_block_index.h"

namespace oomcast::sim {

struct PrivatePool;

struct BlockByAddressOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->address < b->address;
  }
};

class BlockPool {
 public:
  using FreeSet = FreeBlockIndex;
  using UnmappedSet = std::set<Block*, BlockByAddressOrder>;

  // `owner` is the CUDA graph private pool this pool belongs to, or nullptr for the
  // allocator's own small and large pools.
  explicit BlockPool(bool is_small, PrivatePool* owner = nullptr);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  bool is_small() const { return is_small_; }
  PrivatePool* owner() const { return owner_; }
  // torch.cuda.MemPool(no_split=True): the pool's blocks are handed out whole.
  bool no_split() const { return no_split_; }
  void set_no_split(bool no_split) { no_split_ = no_split; }
  FreeSet& blocks() { return blocks_; }
  const FreeSet& blocks() const { return blocks_; }
  UnmappedSet& unmapped() { return unmapped_; }
  const UnmappedSet& unmapped() const { return unmapped_; }

  // Adds a free block, stamping its age for garbage collection. (Inline: once per malloc
  // and free on the replay's hot path.)
  void insert(Block* block) {
    block->gc_count_base = get_free_blocks_call_count;
    blocks_.insert(block);
    block->in_pool = true;
  }
  void erase(Block* block) {
    if (!block->in_pool) return;
    blocks_.erase(block);
    block->in_pool = false;
  }

  // The best fit: the first free block at or after (stream, size, address 0) that is on
  // `stream`, or nullptr.
  Block* lower_bound(uint64_t stream, uint64_t size) const { return blocks_.lower_bound(stream, size); }

  // get_free_block's counter; moves only while garbage collection is active.
  uint64_t get_free_blocks_call_count = 0;

 private:
  bool is_small_;
  bool no_split_ = false;
  PrivatePool* owner_;
  FreeSet blocks_;
  UnmappedSet unmapped_;
};

}  // namespace oomcast::sim
