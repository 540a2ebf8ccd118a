// Buckets: event i goes to bucket i * buckets / events, so each bucket covers the same
// number of events and every event lands in exactly one. The segment map walks the
// allocator's segments once, at the capture event.
#include "advisor/timeline_recorder.h"

#include <algorithm>
#include <unordered_map>

#include "sim/caching_allocator.h"

namespace oomcast::advisor {

const char* segment_piece_state_name(SegmentPieceState state) {
  switch (state) {
    case SegmentPieceState::Allocated: return "allocated";
    case SegmentPieceState::CachedFree: return "cached_free";
    case SegmentPieceState::Fragment: return "fragment";
    case SegmentPieceState::Mixed: return "mixed";
  }
  return "allocated";
}

TimelineRecorder::TimelineRecorder(size_t events, size_t max_buckets, size_t capture_event)
    : events_(events), buckets_(std::max<size_t>(1, std::min(events, max_buckets))), capture_event_(capture_event) {
  recording_.buckets.resize(buckets_);
  recording_.capture_event = capture_event;
}

void TimelineRecorder::after_event(size_t index, const sim::Trace& trace, sim::Replayer& replayer) {
  const sim::MemoryStats& stats = replayer.allocator().stats();
  record(index, static_cast<sim::Bytes>(stats.allocated_bytes.all().current),
         static_cast<sim::Bytes>(stats.reserved_bytes.all().current));
  if (index < trace.events.size() && trace.events[index].kind == sim::EventKind::Alloc) {
    uint32_t slot = trace.events[index].slot;
    if (slot >= alloc_event_of_slot_.size()) alloc_event_of_slot_.resize(slot + 1, UINT32_MAX);
    alloc_event_of_slot_[slot] = static_cast<uint32_t>(std::min<size_t>(index, UINT32_MAX - 1));
  }
  if (index == capture_event_) capture(replayer);
}

void TimelineRecorder::record(size_t index, sim::Bytes allocated, sim::Bytes reserved) {
  size_t which = events_ == 0 ? 0 : std::min(buckets_ - 1, static_cast<size_t>(
                                                               static_cast<unsigned __int128>(index) * buckets_ / events_));
  TimelineBucket& bucket = recording_.buckets[which];
  if (bucket.empty()) {
    bucket.first_event = index;
    bucket.max_allocated_event = index;
  }
  bucket.last_event = index;
  if (allocated > bucket.max_allocated) {
    bucket.max_allocated = allocated;
    bucket.max_allocated_event = index;
  }
  bucket.min_allocated = std::min(bucket.min_allocated, allocated);
  bucket.max_reserved = std::max(bucket.max_reserved, reserved);
  bucket.min_reserved = std::min(bucket.min_reserved, reserved);
}

void TimelineRecorder::capture(sim::Replayer& replayer) {
  std::unordered_map<uint64_t, size_t> event_at_address;
  for (uint32_t slot = 0; slot < alloc_event_of_slot_.size(); ++slot) {
    if (alloc_event_of_slot_[slot] == UINT32_MAX) continue;
    if (uint64_t address = replayer.address_of(slot)) event_at_address[address] = alloc_event_of_slot_[slot];
  }
  recording_.segments.clear();
  recording_.segment_blocks = 0;
  for (const sim::Block* head : replayer.allocator().segment_heads()) {
    SegmentView segment;
    segment.small_pool = head->pool && head->pool->is_small();
    bool first = true;
    const bool whole_segment = !head->next && !head->prev && !head->expandable;
    for (const sim::Block* block = head; block; block = block->next) {
      if (!block->mapped) continue;
      if (first) segment.address = block->address;
      first = false;
      SegmentPiece piece;
      piece.size = block->size;
      if (block->allocated) {
        piece.state = SegmentPieceState::Allocated;
        piece.allocated_bytes = block->size;
        auto found = event_at_address.find(block->address);
        if (found != event_at_address.end()) piece.alloc_event = found->second;
      } else {
        piece.state = whole_segment ? SegmentPieceState::CachedFree : SegmentPieceState::Fragment;
      }
      segment.size += block->size;
      segment.pieces.push_back(piece);
      recording_.segment_blocks += 1;
    }
    if (!segment.pieces.empty()) recording_.segments.push_back(std::move(segment));
  }
}

namespace {

// Merges runs of consecutive pieces below `threshold` bytes into one Mixed piece (or one of
// their common state), so a map of 100,000 blocks still draws as a few thousand shapes.
void merge_small_pieces(SegmentView& segment, uint64_t threshold) {
  std::vector<SegmentPiece> merged;
  merged.reserve(segment.pieces.size());
  for (const SegmentPiece& piece : segment.pieces) {
    bool small = piece.size < threshold;
    if (small && !merged.empty() && merged.back().size < threshold) {
      SegmentPiece& run = merged.back();
      if (run.state != piece.state) run.state = SegmentPieceState::Mixed;
      run.size += piece.size;
      run.blocks += piece.blocks;
      run.allocated_bytes += piece.allocated_bytes;
      run.alloc_event = SIZE_MAX;
      continue;
    }
    merged.push_back(piece);
  }
  segment.pieces = std::move(merged);
}

}  // namespace

TimelineRecording TimelineRecorder::finish(size_t max_pieces) {
  TimelineRecording recording = std::move(recording_);
  // Buckets that no event reached (a trace cut short by an OOM) are dropped.
  recording.buckets.erase(std::remove_if(recording.buckets.begin(), recording.buckets.end(),
                                         [](const TimelineBucket& bucket) { return bucket.empty(); }),
                          recording.buckets.end());
  uint64_t reserved = 0;
  for (const SegmentView& segment : recording.segments) reserved += segment.size;
  if (recording.segment_blocks > max_pieces && max_pieces > 0) {
    uint64_t threshold = reserved / max_pieces;
    for (SegmentView& segment : recording.segments) merge_small_pieces(segment, threshold);
  }
  return recording;
}

}  // namespace oomcast::advisor
