// RecordedLayout: the allocator's memory layout as a snapshot recording shows it, for
// rebuilding the state at a recording window's start and for the recorded peaks. It holds
// segments (cudaMalloc regions, and the mapped runs of expandable segments) and allocated
// blocks; free blocks are the gaps, because free neighbours always merge (spec §14 C3).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "sim/allocator_config.h"
#include "sim/snapshot.h"

namespace oomcast::sim {

struct RecordedSegment {
  uint64_t size = 0;
  uint64_t stream = 0;
  bool is_small = false;
  bool expandable = false;  // a mapped run of an expandable segment
  uint64_t pool = 0;        // a CUDA graph private pool (numbered from 1), or 0 for the allocator's own
};

struct RecordedBlock {
  uint64_t extent = 0;  // block size: the rounded request, or more when unsplit
  uint64_t requested = 0;
  bool pending = false;  // its free was requested, not yet completed (active_pending_free)
};

class RecordedLayout {
 public:
  RecordedLayout(const std::string& name, const AllocatorConfig& config) : name_(name), config_(&config) {}

  std::map<uint64_t, RecordedSegment> segments;  // by address
  std::map<uint64_t, RecordedBlock> allocated;   // by address

  [[noreturn]] void fail(int64_t entry, const std::string& message) const;

  std::map<uint64_t, RecordedSegment>::const_iterator segment_containing(uint64_t address, int64_t entry) const;

  // The size of the block handed out at `address` for a request of `requested` bytes: the
  // rounded size, or the whole free run when the remainder is too small to split off.
  uint64_t infer_extent(uint64_t address, uint64_t requested, int64_t entry) const;

  // Adds a mapped range of an expandable segment, joining the runs it touches.
  void map_range(uint64_t address, uint64_t size, uint64_t stream, bool is_small, int64_t entry);
  // Removes a mapped range (it must lie inside one run and hold no allocated block).
  void unmap_range(uint64_t address, uint64_t size, int64_t entry);

  // The pool of a segment_map / segment_unmap range. Small-pool pages are 2 MiB and a small
  // request maps exactly one; large-pool pages are 20 MiB. An unmap of whole 20 MiB
  // multiples could be either: it belongs to the nearest run of the same stream.
  bool is_small_range(const SnapshotTraceEntry& entry, bool is_unmap) const;

  uint64_t reserved() const;

 private:
  std::string name_;
  const AllocatorConfig* config_;
};

std::string hex(uint64_t value);

}  // namespace oomcast::sim
