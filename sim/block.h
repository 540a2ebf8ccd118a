// Block: the allocator's unit of memory, and the vocabulary of the simulator.
//   segment  - one cudaMalloc region (or one expandable reservation); a doubly linked list
//              of blocks covering it exactly, in address order.
//   block    - a piece of a segment: allocated (handed to a tensor) or free (cached).
//   pool     - the small (blocks <= 1 MiB) or large pool; holds the free blocks.
//   reserved - bytes held from CUDA (all segments); allocated - bytes in allocated blocks.
//   inactive split - a free block in a segment that also has other blocks: memory that
//              empty_cache cannot return.
//   pending free - a block whose free was requested but waits for CUDA events recorded on
//              the other streams that used it (record_stream): not allocated, not reusable,
//              not merged, still active.
#pragma once

#include <cstdint>

namespace oomcast::sim {

class BlockPool;
struct Block;
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
  bool in_pool = false;
  bool allocated = false;
  bool mapped = true;            // false only for unmapped ranges of expandable segments
  bool pending_free = false;     // free requested, waiting for events (or a recorded free_completed)
  bool has_stream_uses = false;  // record_stream named another stream (the streams are kept by the allocator)
  uint32_t event_count = 0;      // outstanding CUDA events of a pending free

  bool is_split() const { return prev != nullptr || next != nullptr; }

  // Copies everything but the pool bookkeeping (which belongs to one object).
  void copy_fields_from(const Block& other) {
    address = other.address;
    size = other.size;
    requested_size = other.requested_size;
    stream = other.stream;
    pool = other.pool;
    prev = other.prev;
    next = other.next;
    expandable = other.expandable;
    gc_count_base = other.gc_count_base;
    allocated = other.allocated;
    mapped = other.mapped;
    pending_free = other.pending_free;
    has_stream_uses = other.has_stream_uses;
    event_count = other.event_count;
  }
  // Resets to a fresh block.
  void reset() {
    Block fresh;
    copy_fields_from(fresh);
    in_pool = false;
  }
};


}  // namespace oomcast::sim
