// TimelineRecorder: what the pictures need from a replay, gathered event by event through
// the Replayer's observer hook: allocated and reserved bytes downsampled into buckets (min
// and max per bucket, so the peak stays exact however long the trace), and the allocator's
// segment map (every block, allocated or free) right after one chosen event, the peak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/trace.h"

namespace oomcast::advisor {

// A run of consecutive events drawn as one x position.
struct TimelineBucket {
  size_t first_event = 0;
  size_t last_event = 0;
  sim::Bytes min_allocated = std::numeric_limits<sim::Bytes>::max();
  sim::Bytes max_allocated = 0;
  sim::Bytes min_reserved = std::numeric_limits<sim::Bytes>::max();
  sim::Bytes max_reserved = 0;
  size_t max_allocated_event = 0;  // the event that set max_allocated
  bool empty() const { return max_allocated == 0 && min_allocated == std::numeric_limits<sim::Bytes>::max(); }
};

enum class SegmentPieceState : uint8_t {
  Allocated,  // handed to a tensor
  CachedFree, // a free segment with no other block: cached, and empty_cache would return it
  Fragment,   // a free piece of a split segment: only requests that fit in it can use it
  Mixed,      // several small neighbouring blocks drawn as one piece (see SegmentPiece::blocks)
};
const char* segment_piece_state_name(SegmentPieceState state);

struct SegmentPiece {
  uint64_t size = 0;
  SegmentPieceState state = SegmentPieceState::Allocated;
  size_t blocks = 1;               // blocks merged into this piece
  uint64_t allocated_bytes = 0;    // of those, allocated
  size_t alloc_event = SIZE_MAX;   // for one allocated block: the event that allocated it
};

struct SegmentView {
  uint64_t address = 0;
  uint64_t size = 0;
  bool small_pool = false;
  std::vector<SegmentPiece> pieces;  // in address order, covering the mapped part
};

struct TimelineRecording {
  std::vector<TimelineBucket> buckets;
  std::vector<SegmentView> segments;  // at the capture event; empty when it was not reached
  size_t capture_event = SIZE_MAX;
  size_t segment_blocks = 0;          // blocks before merging
};

class TimelineRecorder {
 public:
  // `events` is the trace length; at most `max_buckets` buckets; the segment map is taken
  // right after event `capture_event` (SIZE_MAX: never).
  TimelineRecorder(size_t events, size_t max_buckets, size_t capture_event);

  // Call after every event (from Replayer::on_event or a snapshot replay observer).
  void after_event(size_t index, const sim::Trace& trace, sim::Replayer& replayer);
  // The timeline alone, for accounting without an allocator (the cpu device).
  void record(size_t index, sim::Bytes allocated, sim::Bytes reserved);

  // Pieces smaller than total reserved / max_pieces are merged with their small neighbours.
  TimelineRecording finish(size_t max_pieces = 6000);

 private:
  void capture(sim::Replayer& replayer);

  size_t events_;
  size_t buckets_;
  size_t capture_event_;
  TimelineRecording recording_;
  std::vector<uint32_t> alloc_event_of_slot_;  // the event that last allocated each slot
};

}  // namespace oomcast::advisor
