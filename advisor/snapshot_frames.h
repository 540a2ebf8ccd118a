// The stack frames of a real snapshot's device-trace entries, for the analysis: which Python
// line allocated what. The simulator's snapshot reader keeps them when asked (in the same
// pass that reads the trace); frames are interned: one copy each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/snapshot.h"

namespace oomcast::advisor {

struct CallFrame {
  std::string name;      // function
  std::string filename;  // "??" or a C++ file for native frames
  int64_t line = 0;
  bool is_python() const;  // a .py file
};

struct SnapshotFrameTable {
  std::vector<CallFrame> frames;                    // distinct frames
  sim::EntryFrameLists entry_frames;  // per device-trace entry: frame ids, innermost first
  bool has_frames() const;
};

// The table of frames a snapshot was read with (sim::SnapshotReadOptions::frames_of_device),
// which it takes over.
SnapshotFrameTable frame_table_of(sim::SnapshotFrames&& frames);

// Reads device `device_index`'s trace entries' frames from the snapshot pickle (gzipped or
// not). Entries without frames get an empty list. Throws InputError for a corrupt file.
// A caller that also needs the trace reads the snapshot once with frames instead.
SnapshotFrameTable read_snapshot_frames(const std::string& path, int device_index);

}  // namespace oomcast::advisor
