// The malloc and free paths of the caching allocator (spec §2, §3.1-3.3): best-fit lookup,
// splitting, growing by cudaMalloc, the three-step retry, OOM, merging on free, empty_cache.
#include "sim/caching_allocator.h"

#include <algorithm>

#include "sim/size_class.h"

namespace oomcast::sim {

const char* segment_decision_name(SegmentDecision::Kind kind) {
  switch (kind) {
    case SegmentDecision::Kind::Alloc: return "segment_alloc";
    case SegmentDecision::Kind::Free: return "segment_free";
    case SegmentDecision::Kind::Map: return "segment_map";
    case SegmentDecision::Kind::Unmap: return "segment_unmap";
  }
  return "?";
}

CachingAllocator::CachingAllocator(const AllocatorConfig& config, Device& device)
    : config_(config), release_facts_(&allocator_release_facts(config_.torch_version)), device_(device) {
  stats_.max_split_size =
      config_.max_split_size == AllocatorConfig::kUnlimited ? -1 : static_cast<int64_t>(config_.max_split_size);
}

CachingAllocator::~CachingAllocator() = default;

Block* CachingAllocator::new_block() {
  if (!spare_blocks_.empty()) {
    Block* block = spare_blocks_.back();
    spare_blocks_.pop_back();
    block->reset();
    return block;
  }
  return &block_storage_.emplace_back();
}

void CachingAllocator::delete_block(Block* block) {
  block->size = 0;  // size 0 marks a spare block for segment_heads()
  spare_blocks_.push_back(block);
}

void CachingAllocator::record(SegmentDecision::Kind kind, uint64_t address, uint64_t size) {
  if (decisions_) decisions_->push_back(SegmentDecision{kind, address, size, current_event});
}

uint64_t CachingAllocator::allowed_memory_maximum() const {
  return static_cast<uint64_t>(device_.model().memory_fraction * static_cast<double>(device_.total_bytes()));
}

Block* CachingAllocator::malloc(uint64_t requested, uint64_t stream) {
  if (requested == 0) return nullptr;
  last_oom_.reset();
  // Polling events is illegal while a capture is underway, so it waits until none is.
  if (!completed_events_.empty() || !events_deferred_until_no_capture_.empty()) [[unlikely]]
    if (captures_underway_.empty()) process_events();
  if (requested >= kOneExbibyte) {
    stats_.num_ooms += 1;
    last_oom_ = OomDetails{requested, requested, requested, kOneExbibyteOomMessage, kOneExbibyteOomMessage};
    return nullptr;
  }
  uint64_t size = round_size(requested, config_);
  BlockPool& pool = pool_for(size, stream);

  Block* block = get_free_block(pool, stream, size);
  if (!block) {
    uint64_t alloc_size = get_allocation_size(size);
    if (garbage_collection_active()) garbage_collect_cached_blocks();
    block = alloc_block(pool, stream, size, alloc_size, false);
    // 2.10+ tries the use_on_oom pools before freeing any cache; 2.8 and 2.9 only as the last
    // resort after the whole retry (below).
    const bool has_oom_fallback = !use_on_oom_pools_.empty();
    if (!block && has_oom_fallback && release_facts_->use_on_oom_pools_before_release) [[unlikely]]
      block = take_from_use_on_oom_pool(pool, stream, size);
    if (!block && release_available_cached_blocks(pool, stream, size))
      block = alloc_block(pool, stream, size, alloc_size, false);
    if (!block && captures_underway_.empty()) {
      // Third attempt: flush the whole cache. What it released stays released even when
      // the attempt fails, so a caught OOM leaves the cache empty. Not during a capture,
      // where synchronising the device is illegal.
      release_cached_blocks();
      stats_.num_alloc_retries += 1;
      block = alloc_block(pool, stream, size, alloc_size, true);
    }
    if (!block && has_oom_fallback && !release_facts_->use_on_oom_pools_before_release) [[unlikely]]
      block = take_from_use_on_oom_pool(pool, stream, size);
    if (!block) {
      fail_with_oom(requested, size, alloc_size);
      return nullptr;
    }
  }
  return alloc_found_block(block, size, requested);
}

Block* CachingAllocator::get_free_block(BlockPool& pool, uint64_t stream, uint64_t size) {
  if (garbage_collection_active()) pool.get_free_blocks_call_count += 1;
  Block* block = pool.lower_bound(stream, size);
  if (!block) return nullptr;
  if (block->expandable && config_.expandable_segments) {
    // Prefer an interior free block over a tail that borders unmapped space: growing the
    // tail later is cheaper than fragmenting the interior (spec §4.4).
    auto expandable_size = [](const Block* b) {
      return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
    };
    Block* next = pool.blocks().next(block);
    while (block->expandable && next && next->stream == stream && expandable_size(next) < expandable_size(block)) {
      block = next;
      next = pool.blocks().next(next);
    }
  }
  uint64_t max_split = config_.max_split_size;
  if (size < max_split && block->size >= max_split) return nullptr;
  const uint64_t tolerance =
      release_facts_->conf_max_non_split_rounding_mb ? config_.max_non_split_rounding_size : kLargeBuffer;
  if (size >= max_split && block->size >= size + tolerance) return nullptr;
  pool.erase(block);
  return block;
}

bool CachingAllocator::should_split(const Block* block, uint64_t size) const {
  if (block->pool->no_split()) [[unlikely]] return false;
  uint64_t remaining = block->size - size;
  if (block->pool->is_small() || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

Block* CachingAllocator::alloc_found_block(Block* block, uint64_t size, uint64_t requested) {
  bool is_small = block->pool->is_small();
  bool already_split = block->is_split();
  bool tracks_inactive_split = block->expandable == nullptr;
  if (should_split(block, size)) {
    // The front of the block is handed out; the original object becomes the remainder and
    // keeps its stale requested_size (spec §2.4).
    Block* remaining = block;
    block = new_block();
    block->address = remaining->address;
    block->size = size;
    block->stream = remaining->stream;
    block->pool = remaining->pool;
    block->expandable = remaining->expandable;
    block->mapped = true;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    remaining->address += size;
    remaining->size -= size;
    remaining->pool->insert(remaining);
    if (tracks_inactive_split) {
      if (already_split) {
        stats_.inactive_split_bytes.decrease(is_small, static_cast<int64_t>(size));
      } else {
        stats_.inactive_split.increase(is_small, 1);
        stats_.inactive_split_bytes.increase(is_small, static_cast<int64_t>(remaining->size));
      }
    }
  } else if (already_split && tracks_inactive_split) {
    stats_.inactive_split.decrease(is_small, 1);
    stats_.inactive_split_bytes.decrease(is_small, static_cast<int64_t>(block->size));
  }
  block->requested_size = requested;
  mark_allocated(block);
  return block;
}

void CachingAllocator::mark_allocated(Block* block) {
  bool is_small = block->pool->is_small();
  block->allocated = true;
  auto bytes = static_cast<int64_t>(block->size);
  stats_.allocation.increase(is_small, 1);
  stats_.allocated_bytes.increase(is_small, bytes);
  stats_.active.increase(is_small, 1);
  stats_.active_bytes.increase(is_small, bytes);
  stats_.requested_bytes.increase(is_small, static_cast<int64_t>(block->requested_size));
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
}

Block* CachingAllocator::alloc_block(BlockPool& pool, uint64_t stream, uint64_t size, uint64_t alloc_size,
                                     bool /*is_retry*/) {
  uint64_t reserved = static_cast<uint64_t>(stats_.reserved_bytes.all().current);
  if (memory_fraction_set() && reserved + alloc_size > allowed_memory_maximum()) return nullptr;
  // Private pools always take whole cudaMalloc segments, as in PyTorch (their checkpointing
  // does not support expandable segments).
  if (config_.expandable_segments && !pool.owner()) return try_allocate_expandable_block(pool, stream, size);
  std::optional<uint64_t> address = device_.malloc(alloc_size);
  if (!address) return nullptr;
  Block* block = new_block();
  block->address = *address;
  block->size = alloc_size;
  block->stream = stream;
  block->pool = &pool;
  stats_.segment.increase(pool.is_small(), 1);
  stats_.reserved_bytes.increase(pool.is_small(), static_cast<int64_t>(alloc_size));
  if (alloc_size >= config_.max_split_size) stats_.oversize_segments.increase(1);
  stats_.num_device_alloc += 1;
  if (pool.owner()) pool.owner()->segment_count += 1;
  record(SegmentDecision::Kind::Alloc, *address, alloc_size);
  return block;
}

void CachingAllocator::free(Block* block) {
  note_free_request(block);
  if (block->has_stream_uses) {
    if (!captures_underway_.empty()) {
      mark_pending_free(block);
      events_deferred_until_no_capture_.push_back(block);
    } else {
      insert_events(block);
    }
    return;
  }
  free_block(block);
}

void CachingAllocator::note_free_request(Block* block) {
  block->allocated = false;
  bool is_small = block->pool->is_small();
  stats_.allocation.decrease(is_small, 1);
  stats_.allocated_bytes.decrease(is_small, static_cast<int64_t>(block->size));
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
}

void CachingAllocator::free_block(Block* block) {
  BlockPool& pool = *block->pool;
  bool is_small = pool.is_small();
  auto original_size = static_cast<int64_t>(block->size);
  auto requested = static_cast<int64_t>(block->requested_size);
  int64_t inactive_split_blocks = 0;
  int64_t inactive_split_bytes = 0;
  for (Block* neighbour : {block->prev, block->next}) {
    uint64_t subsumed = try_merge_blocks(block, neighbour, pool);
    if (subsumed > 0) {
      inactive_split_blocks -= 1;
      inactive_split_bytes -= static_cast<int64_t>(subsumed);
    }
  }
  pool.insert(block);
  if (block->is_split()) {
    inactive_split_blocks += 1;
    inactive_split_bytes += static_cast<int64_t>(block->size);
  }
  if (!block->expandable) {
    if (inactive_split_blocks > 0) stats_.inactive_split.increase(is_small, inactive_split_blocks);
    if (inactive_split_blocks < 0) stats_.inactive_split.decrease(is_small, -inactive_split_blocks);
    if (inactive_split_bytes > 0) stats_.inactive_split_bytes.increase(is_small, inactive_split_bytes);
    if (inactive_split_bytes < 0) stats_.inactive_split_bytes.decrease(is_small, -inactive_split_bytes);
  }
  stats_.active.decrease(is_small, 1);
  stats_.active_bytes.decrease(is_small, original_size);
  stats_.requested_bytes.decrease(is_small, requested);
}

uint64_t CachingAllocator::try_merge_blocks(Block* destination, Block* source, BlockPool& pool) {
  if (!source || source->allocated || source->pending_free || source->mapped != destination->mapped) return 0;
  // The freed block's object survives the merge, keeping its own requested_size (spec §14 C1).
  if (destination->prev == source) {
    destination->address = source->address;
    destination->prev = source->prev;
    if (destination->prev) destination->prev->next = destination;
  } else {
    destination->next = source->next;
    if (destination->next) destination->next->prev = destination;
  }
  uint64_t subsumed = source->size;
  destination->size += subsumed;
  if (source->mapped) {
    pool.erase(source);
  } else {
    pool.unmapped().erase(source);
  }
  delete_block(source);
  return subsumed;
}

void CachingAllocator::empty_cache() { release_cached_blocks(); }

void CachingAllocator::release_cached_blocks() {
  synchronize_and_free_events();
  stats_.num_sync_all_streams += 1;
  release_blocks(large_pool_);
  release_blocks(small_pool_);
  release_freeable_private_pools();
}

void CachingAllocator::release_blocks(BlockPool& pool) {
  std::vector<Block*> expandable_blocks;
  std::vector<Block*> whole_segments;
  for (Block* block : pool.blocks().in_order()) {
    if (block->expandable) {
      expandable_blocks.push_back(block);
    } else if (!block->prev && !block->next) {
      whole_segments.push_back(block);
    }
  }
  for (Block* block : whole_segments) release_block(block);
  for (Block* block : expandable_blocks) unmap_block(block);
}

void CachingAllocator::release_block(Block* block) {
  BlockPool& pool = *block->pool;
  device_.free(block->address, block->size);
  stats_.segment.decrease(pool.is_small(), 1);
  stats_.reserved_bytes.decrease(pool.is_small(), static_cast<int64_t>(block->size));
  if (block->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  stats_.num_device_free += 1;
  if (pool.owner()) pool.owner()->segment_count -= 1;
  record(SegmentDecision::Kind::Free, block->address, block->size);
  pool.erase(block);
  delete_block(block);
}

void CachingAllocator::fail_with_oom(uint64_t requested, uint64_t rounded, uint64_t alloc_size) {
  stats_.num_ooms += 1;
  const DeviceModel& model = device_.model();
  OomFigures figures;
  figures.alloc_size = alloc_size;
  figures.device_index = model.device_index;
  figures.device_total = device_.total_bytes();
  figures.device_free = device_.free_bytes();
  figures.nvml_available = model.nvml_available;
  auto reserved = static_cast<uint64_t>(stats_.reserved_bytes.all().current);
  figures.process_in_use = model.context_bytes + reserved;
  figures.memory_fraction_set = memory_fraction_set();
  figures.allowed_bytes = allowed_memory_maximum();
  figures.allocated_bytes = static_cast<uint64_t>(stats_.allocated_bytes.all().current);
  figures.reserved_bytes = reserved;
  for (const auto& [id, pool] : private_pools_)
    for (const BlockPool* blocks : {&pool->small_blocks, &pool->large_blocks})
      for (const Block* block : blocks->blocks().in_order()) figures.cached_in_private_pools += block->size;
  figures.expandable_segments = config_.expandable_segments;
  figures.torch_version = config_.torch_version;
  last_oom_ = OomDetails{requested, rounded, alloc_size, current_oom_message(figures), legacy_oom_message(figures)};
}

std::vector<Block*> CachingAllocator::restore_segment(uint64_t address, uint64_t stream, bool is_small,
                                                      const std::vector<RestoredBlock>& blocks, uint64_t pool_id) {
  BlockPool* chosen = is_small ? &small_pool_ : &large_pool_;
  if (pool_id != 0) {
    PrivatePool* owner = find_private_pool(pool_id);
    if (!owner) owner = private_pools_.emplace(pool_id, std::make_unique<PrivatePool>(pool_id)).first->second.get();
    owner->segment_count += 1;
    chosen = is_small ? &owner->small_blocks : &owner->large_blocks;
  }
  BlockPool& pool = *chosen;
  std::vector<Block*> created;
  uint64_t offset = 0;
  Block* previous = nullptr;
  for (const RestoredBlock& restored : blocks) {
    Block* block = new_block();
    block->address = address + offset;
    block->size = restored.size;
    block->requested_size = restored.requested_size;
    block->stream = stream;
    block->pool = &pool;
    block->prev = previous;
    if (previous) previous->next = block;
    previous = block;
    offset += restored.size;
    created.push_back(block);
  }
  device_.adopt_region(address, offset);
  stats_.segment.increase(is_small, 1);
  stats_.reserved_bytes.increase(is_small, static_cast<int64_t>(offset));
  if (offset >= config_.max_split_size) stats_.oversize_segments.increase(1);
  for (size_t i = 0; i < created.size(); ++i) {
    Block* block = created[i];
    if (blocks[i].allocated) {
      mark_allocated(block);
    } else {
      pool.insert(block);
      if (block->is_split()) {
        stats_.inactive_split.increase(is_small, 1);
        stats_.inactive_split_bytes.increase(is_small, static_cast<int64_t>(block->size));
      }
    }
  }
  return created;
}

void CachingAllocator::reset_peak_stats() {
  for (StatArray* array : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                           &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                           &stats_.inactive_split_bytes, &stats_.requested_bytes})
    array->reset_peaks();
  stats_.oversize_allocations.peak = stats_.oversize_allocations.current;
  stats_.oversize_segments.peak = stats_.oversize_segments.current;
}

std::vector<const Block*> CachingAllocator::segment_heads() const {
  std::vector<const Block*> heads;
  for (const Block& block : block_storage_)
    if (block.size > 0 && !block.prev) heads.push_back(&block);
  std::sort(heads.begin(), heads.end(), [](const Block* a, const Block* b) { return a->address < b->address; });
  return heads;
}

}  // namespace oomcast::sim
