// replay_snapshot(): replays a real torch.cuda.memory._snapshot() through the simulator and
// compares every segment decision (cudaMalloc / cudaFree) and block address it makes with
// the recorded ones. A recording window that starts mid-run is handled by rebuilding the
// allocator state at the window's start from the dump-time segments, undoing the recorded
// events backwards (docs/allocator-model.md, "Snapshot replay").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/snapshot.h"

namespace oomcast::sim {

struct SnapshotMismatch {
  size_t decision_index = 0;    // position in the list of segment decisions
  int64_t snapshot_event = -1;  // index into the snapshot's device trace (-1: none recorded)
  std::string recorded;         // "segment_alloc 20971520 at 0x7f...", or "nothing"
  std::string simulated;
};

struct SnapshotReplayReport {
  std::vector<int> devices_in_file;     // every device the snapshot holds (snapshot_devices)
  Trace trace;                          // the alloc / free / empty_cache events derived from the recording
  ReplayResult replay;                  // what the simulator did with them
  bool starts_empty = true;             // the window begins on an empty allocator
  size_t initial_segments = 0;          // rebuilt state at the window's start
  size_t initial_allocated_blocks = 0;
  uint64_t initial_reserved_bytes = 0;
  size_t recorded_segment_decisions = 0;
  size_t segment_decisions_matched = 0; // length of the prefix that agrees in kind, size and address
  std::optional<SnapshotMismatch> first_mismatch;
  size_t block_addresses_checked = 0;   // allocs whose simulated block address was compared
  size_t block_addresses_matched = 0;
  uint64_t recorded_peak_reserved_bytes = 0;
  uint64_t recorded_peak_allocated_bytes = 0;  // from recorded addresses; block sizes inferred by the split rule
  bool recorded_oom = false;
  std::vector<int64_t> entry_of_event;  // trace event -> index of its entry in the device trace
  // Per trace slot: the size of the block it was given (0: none, as for a failed or zero-byte
  // alloc). Slots [0, initial_allocated_blocks) are the blocks live at the window's start.
  std::vector<uint64_t> block_bytes_of_slot;
};

// A block allocated right after one event of a snapshot replay.
struct LiveBlock {
  size_t alloc_event = SIZE_MAX;  // the trace event that allocated it; SIZE_MAX: before the window
  uint64_t bytes = 0;             // its block size
};

// The blocks allocated right after trace event `event` of `report`'s replay (in slot order),
// from the trace and the recorded block sizes, without replaying again. Empty when `event`
// is past the trace's end.
std::vector<LiveBlock> live_blocks_after(const SnapshotReplayReport& report, size_t event);

// Called after each replayed event (analysis and pictures read the allocator's state there).
using SnapshotReplayObserver = std::function<void(size_t event, Replayer& replayer)>;

// Replays device `device_index` of `snapshot` (one replay per device: each has its own
// allocator). Expandable segments are replayed too: their segment_map / segment_unmap are
// compared like segment_alloc / segment_free. Throws InputError when the recording is
// inconsistent (a free of a block that is not allocated, an alloc outside every segment)
// and when the snapshot holds devices but not `device_index`. `device` bounds the replay
// (another card's memory, fraction, context): allocations that do not fit are reported as
// OOMs (replay.num_ooms, replay.oom) and the replay goes on.
SnapshotReplayReport replay_snapshot(const Snapshot& snapshot, const AllocatorConfig& config,
                                     const std::string& name, int device_index = 0,
                                     bool check_invariants = false,
                                     const SnapshotReplayObserver& observer = {},
                                     const DeviceModel& device = DeviceModel::unlimited());

// The devices a snapshot holds (with segments or trace entries), ascending.
std::vector<int> snapshot_devices(const Snapshot& snapshot);

// The allocator configuration a snapshot was recorded with (its allocator_settings).
AllocatorConfig snapshot_allocator_config(const Snapshot& snapshot);

}  // namespace oomcast::sim
