// SegmentDecision: one cudaMalloc / cudaFree (or expandable map / unmap) the allocator
// issued. Replays of real snapshots compare these with the recorded segment events.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oomcast::sim {

struct SegmentDecision {
  enum class Kind { Alloc, Free, Map, Unmap };
  Kind kind = Kind::Alloc;
  uint64_t address = 0;
  uint64_t size = 0;
  size_t event_index = 0;  // the trace event during which it happened

  bool operator==(const SegmentDecision& other) const {
    return kind == other.kind && address == other.address && size == other.size;
  }
};

const char* segment_decision_name(SegmentDecision::Kind kind);

}  // namespace oomcast::sim
