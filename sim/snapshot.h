// Snapshot: the parts of a torch.cuda.memory._snapshot() pickle the simulator needs:
// dump-time segments with their blocks, the recorded trace entries and allocator_settings.
// read_snapshot() decodes .pickle and .pickle.gz natively (no Python); spec §8.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/gzip_file.h"

namespace oomcast::sim {

struct SnapshotBlock {
  enum class State { ActiveAllocated, ActivePendingFree, Inactive };
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;
  State state = State::Inactive;
};

struct SnapshotSegment {
  int64_t device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t requested_size = 0;
  uint64_t stream = 0;
  bool is_small_pool = false;   // segment_type == "small"
  bool is_expandable = false;
  int64_t pool_id_first = 0;    // segment_pool_id; (0, 0) is the default pool
  int64_t pool_id_second = 0;
  std::vector<SnapshotBlock> blocks;
};

struct SnapshotTraceEntry {
  enum class Action {
    Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, SegmentMap, SegmentUnmap,
    Oom, Snapshot, Other
  };
  Action action = Action::Other;
  uint64_t addr = 0;         // for Oom: device_free
  uint64_t size = 0;
  uint64_t stream = 0;
  int64_t time_us = 0;       // 0 when the file has none
};

// One stack frame as snapshots carry them ({'name', 'filename', 'line'}). A reader keeps a
// trace entry's frames only when asked (SnapshotReadOptions), since they are most of a
// snapshot's bytes and none of the allocator's business; the exporter writes them.
struct SnapshotFrame {
  std::string name;      // function
  std::string filename;  // "??" or a C++ file for native frames
  int64_t line = 0;
};

// Per trace entry, a list of frame ids (innermost first); all lists share one array.
class EntryFrameLists {
 public:
  size_t size() const { return starts_.size(); }
  std::span<const uint32_t> operator[](size_t entry) const {
    const size_t end = entry + 1 < starts_.size() ? starts_[entry + 1] : ids_.size();
    return {ids_.data() + starts_[entry], end - starts_[entry]};
  }
  // True when some entry has a frame.
  bool any() const { return !ids_.empty(); }
  // Appends the next entry with no frames yet; add() appends to it.
  void start_entry() { starts_.push_back(ids_.size()); }
  void add(uint32_t id) { ids_.push_back(id); }
  void push_back(std::span<const uint32_t> ids) {
    start_entry();
    ids_.insert(ids_.end(), ids.begin(), ids.end());
  }
  // Room for `entries` entries holding `ids` frame ids in all: a real snapshot's lists hold
  // hundreds of thousands of ids, and growing the array by doubling would copy them and touch
  // fresh pages each time (page faults were half of a replay's system time).
  void reserve(size_t entries, size_t ids = 0) {
    starts_.reserve(entries);
    ids_.reserve(ids);
  }

 private:
  std::vector<size_t, HugePageAllocator<size_t>> starts_;  // per entry: where its list begins in ids_
  std::vector<uint32_t, HugePageAllocator<uint32_t>> ids_;
};

// The frames of one device's trace entries, interned: each distinct frame is kept once.
struct SnapshotFrames {
  std::vector<SnapshotFrame> frames;  // distinct frames
  EntryFrameLists entry_frames;       // per trace entry: frame ids, innermost first
};

struct SnapshotReadOptions {
  // Also keep the frames of this device's trace entries (in the same pass over the file);
  // -1 skips every frame.
  int frames_of_device = -1;
};

struct Snapshot {
  std::vector<SnapshotSegment> segments;                        // sorted by address
  std::vector<std::vector<SnapshotTraceEntry>> device_traces;   // one list per device
  std::optional<std::string> alloc_conf;                        // allocator_settings["PYTORCH_CUDA_ALLOC_CONF"]
  bool has_allocator_settings = false;
  bool expandable_segments = false;                             // allocator_settings["expandable_segments"]
  int64_t max_split_size = -1;                                  // allocator_settings["max_split_size"]
  SnapshotFrames frames;  // only with SnapshotReadOptions::frames_of_device (empty if it has no traces)
};

// True when `path` ends in .pickle or .pickle.gz (or .pkl / .pkl.gz).
bool looks_like_snapshot_path(const std::string& path);

// Reads a snapshot pickle, gzipped or not (decided by the gzip magic bytes, not the name).
// Throws InputError naming the file and the byte offset for truncated or corrupt input.
Snapshot read_snapshot(const std::string& path, const SnapshotReadOptions& options = {});

// Same, from bytes already in memory (already decompressed). `name` is used in errors.
Snapshot parse_snapshot(const std::string& name, const uint8_t* data, size_t size,
                        const SnapshotReadOptions& options = {});

}  // namespace oomcast::sim
