// Call frames from the simulator's snapshot reader (which interns them as it reads the trace:
// a 100,000-entry trace whose entries share a few hundred distinct frames stays small).
#include "advisor/snapshot_frames.h"

#include <utility>

namespace oomcast::advisor {

bool CallFrame::is_python() const { return filename.size() > 3 && filename.ends_with(".py"); }

bool SnapshotFrameTable::has_frames() const {
  return entry_frames.any();
}

SnapshotFrameTable frame_table_of(sim::SnapshotFrames&& frames) {
  SnapshotFrameTable table;
  table.frames.reserve(frames.frames.size());
  for (sim::SnapshotFrame& frame : frames.frames)
    table.frames.push_back(CallFrame{std::move(frame.name), std::move(frame.filename), frame.line});
  table.entry_frames = std::move(frames.entry_frames);
  return table;
}

SnapshotFrameTable read_snapshot_frames(const std::string& path, int device_index) {
  return frame_table_of(std::move(sim::read_snapshot(path, {device_index}).frames));
}

}  // namespace oomcast::advisor
