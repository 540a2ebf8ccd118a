// Block: the allocator's unit of memory, and the vocabulary of the simulator.
//   segment  - one cudaMalloc region (or one expandable reservation); a doubly linked list
//              of blocks covering it exactly, in address order.
//   block    - a piece of a segment: allocated (handed to a tensor) or free (cached).
//   pool     - the small (blocks <= 1 MiB) or large pool; holds the free blocks.
//   reserved - bytes held from CUDA (all segments); allocated - bytes in allocated blocks.
//   inactive split - a free block in a segment that also has other blocks: memory that
//              empty_cache cannot return.
#pragma once

#include <cstdint>

namespace oomcast::sim {

class BlockPool;
struct ExpandableSegment;

struct Block {
  uint64_t address = 0;
  uint64_t size = 0;             // a multiple of 512
  uint64_t requested_size = 0;   // the unrounded request of its last allocation (stale when free)
  uint64_t stream = 0;           // the stream of its segment
  BlockPool* pool = nullptr;
  Block* prev = nullptr;         // neighbours in the same segment
  Block* next = nullptr;
  ExpandableSegment* expandable = nullptr;  // non-null for blocks of an expandable segment
  uint64_t gc_count_base = 0;    // pool's get_free_block call count when it entered the pool
  bool allocated = false;
  bool mapped = true;            // false only for unmapped ranges of expandable segments

  bool is_split() const { return prev != nullptr || next != nullptr; }
};

}  // namespace oomcast::sim
