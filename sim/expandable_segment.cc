// Expandable segments (spec §4): growing a per-stream reservation page by page, and
// unmapping whole free pages on release. Reserved memory moves in page steps; there are no
// segment counts and no inactive-split accounting for these blocks.
#include <algorithm>

#include "sim/caching_allocator.h"
#include "sim/size_class.h"

namespace oomcast::sim {
namespace {

uint64_t round_up(uint64_t value, uint64_t step) { return (value + step - 1) / step * step; }
uint64_t round_down(uint64_t value, uint64_t step) { return value / step * step; }

// Virtual bytes one reservation covers: about 1.125 x the device (spec §4.1).
uint64_t reservation_size(uint64_t page, uint64_t total_memory) {
  return page * ((total_memory + total_memory / 8 + page - 1) / page);
}

// PyTorch's `allocatable`: a freed block whose free still waits for stream events is not
// allocated, yet it is not free either (it is out of the pool until its events complete).
bool is_free_or_unmapped(const Block* block) { return !block->allocated && !block->pending_free; }

}  // namespace

Block* CachingAllocator::find_expandable_block(BlockPool& pool, uint64_t stream, uint64_t size) {
  for (Block* unmapped : pool.unmapped()) {
    if (unmapped->stream != stream) continue;
    Block* start = unmapped;
    if (start->prev && is_free_or_unmapped(start->prev)) start = start->prev;
    uint64_t total = 0;
    for (Block* block = start; block && is_free_or_unmapped(block); block = block->next) {
      total += block->size;
      if (total >= size) return start;
    }
  }
  // No reservation of this pool and stream has room: reserve a new one (~1.125x the device).
  uint64_t page = pool.is_small() ? kSmallBuffer : kLargeBuffer;
  uint64_t total_memory = device_.total_bytes();
  auto segment = std::make_unique<ExpandableSegment>();
  segment->page_size = page;
  segment->reserved_size = reservation_size(page, total_memory);
  segment->base = device_.reserve_address_space(segment->reserved_size);
  segment->stream = stream;
  segment->pool = &pool;
  Block* whole = new_block();
  whole->address = segment->base;
  whole->size = segment->reserved_size;
  whole->stream = stream;
  whole->pool = &pool;
  whole->expandable = segment.get();
  whole->mapped = false;
  pool.unmapped().insert(whole);
  expandable_segments_.push_back(std::move(segment));
  return whole;
}

Block* CachingAllocator::map_block(Block* unmapped, uint64_t size) {
  ExpandableSegment& segment = *unmapped->expandable;
  BlockPool& pool = *unmapped->pool;
  uint64_t mapped_size = std::min(round_up(size, segment.page_size), unmapped->size);
  if (!device_.map(unmapped->address, mapped_size)) return nullptr;
  pool.unmapped().erase(unmapped);
  if (mapped_size < unmapped->size) {
    // The tail stays an unmapped block.
    Block* tail = new_block();
    tail->address = unmapped->address + mapped_size;
    tail->size = unmapped->size - mapped_size;
    tail->stream = unmapped->stream;
    tail->pool = &pool;
    tail->expandable = unmapped->expandable;
    tail->mapped = false;
    tail->prev = unmapped;
    tail->next = unmapped->next;
    if (tail->next) tail->next->prev = tail;
    unmapped->next = tail;
    unmapped->size = mapped_size;
    pool.unmapped().insert(tail);
  }
  unmapped->mapped = true;
  uint64_t mapped_address = unmapped->address;
  segment.mapped_bytes += mapped_size;
  try_merge_blocks(unmapped, unmapped->prev, pool);
  try_merge_blocks(unmapped, unmapped->next, pool);
  pool.insert(unmapped);
  stats_.reserved_bytes.increase(pool.is_small(), static_cast<int64_t>(mapped_size));
  stats_.num_device_alloc += 1;
  record(SegmentDecision::Kind::Map, mapped_address, mapped_size);
  return unmapped;
}

Block* CachingAllocator::try_allocate_expandable_block(BlockPool& pool, uint64_t stream, uint64_t size) {
  Block* candidate = find_expandable_block(pool, stream, size);
  if (!candidate->mapped) {
    candidate = map_block(candidate, std::min(size, candidate->size));
    if (!candidate) return nullptr;
  }
  while (candidate->size < size) {
    Block* following = candidate->next;
    uint64_t missing = size - candidate->size;
    candidate = map_block(following, std::min(missing, following->size));
    if (!candidate) return nullptr;
  }
  pool.erase(candidate);
  return candidate;
}

void CachingAllocator::unmap_block(Block* block) {
  ExpandableSegment& segment = *block->expandable;
  BlockPool& pool = *block->pool;
  uint64_t begin = segment.base + round_up(block->address - segment.base, segment.page_size);
  uint64_t end = segment.base + round_down(block->address + block->size - segment.base, segment.page_size);
  if (end <= begin) return;
  pool.erase(block);
  // Split off the partial pages before and after; they stay mapped and free in the pool.
  if (begin > block->address) {
    Block* head = new_block();
    head->copy_fields_from(*block);
    head->size = begin - block->address;
    head->next = block;
    if (head->prev) head->prev->next = head;
    block->prev = head;
    block->address = begin;
    block->size -= head->size;
    pool.insert(head);
  }
  if (end < block->address + block->size) {
    Block* tail = new_block();
    tail->copy_fields_from(*block);
    tail->address = end;
    tail->size = block->address + block->size - end;
    tail->prev = block;
    if (tail->next) tail->next->prev = tail;
    block->next = tail;
    block->size = end - block->address;
    pool.insert(tail);
  }
  uint64_t unmapped_size = block->size;
  device_.unmap(block->address, unmapped_size);
  segment.mapped_bytes -= unmapped_size;
  stats_.reserved_bytes.decrease(pool.is_small(), static_cast<int64_t>(unmapped_size));
  stats_.num_device_free += 1;
  record(SegmentDecision::Kind::Unmap, block->address, unmapped_size);
  block->mapped = false;
  try_merge_blocks(block, block->prev, pool);
  try_merge_blocks(block, block->next, pool);
  pool.unmapped().insert(block);
  if (!block->prev && !block->next) release_expandable_segment(&segment, block);
}

void CachingAllocator::release_expandable_segment(ExpandableSegment* segment, Block* whole_range) {
  segment->pool->unmapped().erase(whole_range);
  device_.release_address_space(segment->base, segment->reserved_size);
  delete_block(whole_range);
  auto found = std::find_if(expandable_segments_.begin(), expandable_segments_.end(),
                            [segment](const auto& owned) { return owned.get() == segment; });
  if (found != expandable_segments_.end()) expandable_segments_.erase(found);
}

std::vector<std::vector<Block*>> CachingAllocator::restore_expandable_segment(uint64_t base, uint64_t stream,
                                                                              bool is_small,
                                                                              const std::vector<RestoredRun>& runs) {
  BlockPool& pool = is_small ? small_pool_ : large_pool_;
  uint64_t page = is_small ? kSmallBuffer : kLargeBuffer;
  auto segment = std::make_unique<ExpandableSegment>();
  segment->page_size = page;
  segment->base = base;
  segment->stream = stream;
  segment->pool = &pool;
  uint64_t end_of_runs = base;
  for (const RestoredRun& run : runs) {
    uint64_t size = 0;
    for (const RestoredBlock& block : run.blocks) size += block.size;
    end_of_runs = std::max(end_of_runs, run.address + size);
  }
  segment->reserved_size = std::max(reservation_size(page, device_.total_bytes()), round_up(end_of_runs - base, page));

  Block* previous = nullptr;
  auto append = [&](uint64_t address, uint64_t size, bool mapped) {
    Block* block = new_block();
    block->address = address;
    block->size = size;
    block->stream = stream;
    block->pool = &pool;
    block->expandable = segment.get();
    block->mapped = mapped;
    block->prev = previous;
    if (previous) previous->next = block;
    previous = block;
    if (!mapped) pool.unmapped().insert(block);
    return block;
  };
  std::vector<std::vector<Block*>> created;
  std::vector<std::pair<Block*, bool>> mapped_blocks;  // block, allocated
  uint64_t cursor = base;
  for (const RestoredRun& run : runs) {
    if (run.address > cursor) append(cursor, run.address - cursor, false);
    cursor = run.address;
    std::vector<Block*>& blocks = created.emplace_back();
    for (const RestoredBlock& restored : run.blocks) {
      Block* block = append(cursor, restored.size, true);
      block->requested_size = restored.requested_size;
      blocks.push_back(block);
      mapped_blocks.emplace_back(block, restored.allocated);
      cursor += restored.size;
    }
    uint64_t run_size = cursor - run.address;
    device_.adopt_region(run.address, run_size);
    segment->mapped_bytes += run_size;
    stats_.reserved_bytes.increase(is_small, static_cast<int64_t>(run_size));
  }
  if (cursor < base + segment->reserved_size) append(cursor, base + segment->reserved_size - cursor, false);
  for (auto [block, allocated] : mapped_blocks) {
    if (allocated) {
      mark_allocated(block);
    } else {
      pool.insert(block);
    }
  }
  expandable_segments_.push_back(std::move(segment));
  return created;
}

}  // namespace oomcast::sim
