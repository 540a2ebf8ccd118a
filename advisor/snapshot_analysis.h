// Analysis of a real snapshot's replay: the live allocations at the allocated peak grouped by
// call site (the innermost Python frame of the user's code, plus the innermost Python frame
// when that is torch's), the same bytes in categories read from the frames (setup, forward,
// backward, optimizer step), and every allocation of the window by call site. diff_snapshots()
// compares two runs site by site (snapshot_diff.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/snapshot_frames.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

namespace oomcast::advisor {

struct CallSite {
  std::string site;  // "benchmark.py:234 run_step": the user's frame; or the autograd node / aten op
  std::string via;   // the innermost Python frame when it is not the user's ("torch/nn/modules/linear.py:117 forward")
  bool operator==(const CallSite& other) const { return site == other.site && via == other.via; }
};

struct SiteBytes {
  CallSite where;
  uint64_t bytes = 0;
  size_t blocks = 0;
};

struct SnapshotAnalysis {
  std::string name;
  bool has_frames = false;
  uint64_t peak_allocated_bytes = 0;
  size_t peak_event = 0;
  CallSite peak_site;                        // what the allocation that set the peak was
  std::vector<SiteBytes> live_at_peak;       // block bytes (rounded, as allocated counts them), largest first
  std::vector<SiteBytes> categories;         // the same bytes by frame rule, largest first
  std::vector<SiteBytes> allocated_in_window;// requested bytes of every alloc entry, largest first
};

// The call site of device-trace entry `entry` (see CallSite). "(no frames)" without frames.
CallSite call_site_of(const SnapshotFrameTable& frames, int64_t entry);

// The category rule: "optimizer step", "backward", "model setup", "forward", "other" (first
// that matches, in that order; the rules are in snapshot_analysis.cc).
const char* frame_category(const SnapshotFrameTable& frames, int64_t entry);

// Groups the blocks allocated at `report`'s peak (sim::live_blocks_after: no second replay)
// and every alloc of the window by call site. `snapshot`, `config` and `device_index` are
// those `report` was replayed with.
SnapshotAnalysis analyze_snapshot(const std::string& name, const sim::Snapshot& snapshot,
                                  const sim::AllocatorConfig& config, int device_index,
                                  const sim::SnapshotReplayReport& report, const SnapshotFrameTable& frames);

// "largest live allocations at the peak, by call site" and "categories at the peak", top rows.
std::string render_analysis_text(const SnapshotAnalysis& analysis, size_t top);
std::string call_site_text(const CallSite& where);
// {"has_frames", "peak_site", "live_at_peak": [{site, via, bytes, blocks}] (top rows),
//  "categories": [{category, bytes, blocks}], "allocated_in_window": [...] (top rows)}
nlohmann::json analysis_json(const SnapshotAnalysis& analysis, size_t top);

}  // namespace oomcast::advisor
