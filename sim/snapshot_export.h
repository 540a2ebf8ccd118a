// export_snapshot(): a simulated run written as a PyTorch memory snapshot pickle, the file
// torch.cuda.memory._dump_snapshot() writes: `segments` (the allocator's state at the end,
// with their blocks), `device_traces` (alloc, free_requested, free_completed,
// segment_alloc, segment_free, segment_map, segment_unmap, oom: the real action names, in
// the order the real allocator records them), `allocator_settings` and
// `external_annotations`. PyTorch's memory_viz page and snapshot tools read it, and
// `oomcast replay` of it reproduces the simulator's segment decisions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/snapshot.h"  // SnapshotFrame

namespace oomcast::sim {

// Fills `frames` (cleared by the caller) for the alloc event `event` of the trace.
using SnapshotFramesOf = std::function<void(size_t event, std::vector<SnapshotFrame>& frames)>;

struct SnapshotExport {
  ReplayResult replay;       // the run that was written (stopped at its first OOM)
  size_t trace_entries = 0;  // entries written to device_traces[0]
  size_t segments = 0;       // segments at the end of the run
  size_t bytes = 0;          // size of the pickle before any compression
};

// Replays `trace` on `device` and returns the snapshot pickle's bytes in `pickle_out`.
SnapshotExport build_snapshot_pickle(const Trace& trace, const AllocatorConfig& config, const DeviceModel& device,
                                     const SnapshotFramesOf& frames_of, std::string& pickle_out);

// The same, written to `path` (gzipped when it ends in .gz). Throws InputError naming the
// path and `flag` when it cannot be written.
SnapshotExport export_snapshot(const std::string& path, const Trace& trace, const AllocatorConfig& config,
                               const DeviceModel& device, const SnapshotFramesOf& frames_of,
                               const std::string& flag = "--export-snapshot");

}  // namespace oomcast::sim
