// The stack frames of a real snapshot's device-trace entries, which the simulator's snapshot
// reader skips (they are most of the file and none of the allocator's business), read here
// for the analysis: which Python line allocated what. Frames are interned: one copy each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::planner {

struct CallFrame {
  std::string name;      // function
  std::string filename;  // "??" or a C++ file for native frames
  int64_t line = 0;
  bool is_python() const;  // a .py file
};

struct SnapshotFrameTable {
  std::vector<CallFrame> frames;                    // distinct frames
  std::vector<std::vector<uint32_t>> entry_frames;  // per device-trace entry: frame ids, innermost first
  bool has_frames() const;
};

// Reads device `device_index`'s trace entries' frames from the snapshot pickle (gzipped or
// not). Entries without frames get an empty list. Throws InputError for a corrupt file.
SnapshotFrameTable read_snapshot_frames(const std::string& path, int device_index);

}  // namespace oomcast::planner
