// Frees that wait for other streams (spec §7): tensor.record_stream(s) makes the block's
// free record a CUDA event on s; the block stays active, unmerged and out of the pool until
// every such event has completed and a malloc polls them (process_events), or empty_cache /
// the OOM retry synchronises everything. A trace cannot know GPU timing, so an event
// completes at the synchronisation point the trace reports (a stream or device sync).
#include <algorithm>

#include "sim/caching_allocator.h"

namespace oomcast::sim {

void CachingAllocator::record_stream(Block* block, uint64_t stream) {
  if (stream == block->stream) return;
  std::vector<uint64_t>& uses = stream_uses_[block];
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
  block->has_stream_uses = true;
}

void CachingAllocator::insert_events(Block* block) {
  mark_pending_free(block);
  record_events_on_used_streams(block);
}

void CachingAllocator::mark_pending_free(Block* block) {
  block->pending_free = true;
  pending_frees_ += 1;
}

void CachingAllocator::record_events_on_used_streams(Block* block) {
  auto uses = stream_uses_.find(block);
  for (uint64_t stream : uses->second) {
    outstanding_events_[stream].push_back(block);
    block->event_count += 1;
  }
  stream_uses_.erase(uses);
  block->has_stream_uses = false;
}

void CachingAllocator::insert_events_deferred_until_no_capture() {
  std::vector<Block*> deferred;
  deferred.swap(events_deferred_until_no_capture_);
  for (Block* block : deferred) record_events_on_used_streams(block);
}

void CachingAllocator::request_free(Block* block) {
  if (block->has_stream_uses) {
    stream_uses_.erase(block);
    block->has_stream_uses = false;
  }
  note_free_request(block);
  block->pending_free = true;
  pending_frees_ += 1;
}

void CachingAllocator::complete_free(Block* block) {
  block->pending_free = false;
  pending_frees_ -= 1;
  free_block(block);
}

void CachingAllocator::synchronize_stream(uint64_t stream) {
  auto events = outstanding_events_.find(stream);
  if (events == outstanding_events_.end()) return;
  for (Block* block : events->second)
    if (--block->event_count == 0) completed_events_.push_back(block);
  outstanding_events_.erase(events);
}

void CachingAllocator::synchronize_device() {
  while (!outstanding_events_.empty()) synchronize_stream(outstanding_events_.begin()->first);
}

void CachingAllocator::process_events() {
  insert_events_deferred_until_no_capture();
  std::vector<Block*> completed;
  completed.swap(completed_events_);
  for (Block* block : completed) complete_free(block);
}

void CachingAllocator::synchronize_and_free_events() {
  insert_events_deferred_until_no_capture();
  synchronize_device();
  process_events();
}

}  // namespace oomcast::sim
