// `oomcast diff A.pickle B.pickle`: what two runs allocate differently, call site by call
// site (live at each run's peak, and allocated over each recording window), and where their
// peaks differ.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "advisor/snapshot_analysis.h"

namespace oomcast::advisor {

struct SiteDiff {
  CallSite where;
  // B's site when the two runs' code differs in file or line but not in function and via frame
  // (a site found in one run only, paired with the only such site of the other); else empty.
  std::string site_b;
  uint64_t live_a = 0, live_b = 0;            // at each run's allocated peak
  uint64_t allocated_a = 0, allocated_b = 0;  // requested bytes over the window
  size_t allocs_a = 0, allocs_b = 0;
  int64_t live_delta() const { return static_cast<int64_t>(live_b) - static_cast<int64_t>(live_a); }
  int64_t allocated_delta() const { return static_cast<int64_t>(allocated_b) - static_cast<int64_t>(allocated_a); }
};

struct SnapshotDiff {
  SnapshotAnalysis a, b;
  std::vector<SiteDiff> sites;  // by |live delta|, then |allocated delta|, largest first; equal sites last
};

SnapshotDiff diff_snapshots(SnapshotAnalysis a, SnapshotAnalysis b);

std::string render_diff_text(const SnapshotDiff& diff, size_t top);
// {"a": {name, peak_allocated_bytes, peak_site}, "b": {...}, "peak_delta_bytes",
//  "sites": [{site, via, live_a, live_b, live_delta, allocated_a, allocated_b, allocated_delta,
//  allocs_a, allocs_b}]}
std::string render_diff_json(const SnapshotDiff& diff);

}  // namespace oomcast::advisor
