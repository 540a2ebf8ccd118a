// The HTML report of `oomcast replay`: a trace file, or a real torch.cuda.memory._snapshot()
// replayed through the simulator, drawn with the same pictures as a plan.
#pragma once

#include <functional>
#include <string>

#include "advisor/html_report.h"
#include "advisor/snapshot_analysis.h"
#include "sim/replay.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

namespace oomcast::advisor {

// Replays `trace` again with a TimelineRecorder. `first` is the replay already made (its
// peak event is where the segment map is taken).
HtmlReport trace_html_report(const std::string& file, const sim::Trace& trace, const sim::AllocatorConfig& config,
                             const sim::DeviceModel& device, const sim::ReplayOptions& options,
                             const sim::ReplayResult& first);

// Replays the snapshot again with a TimelineRecorder. `entry_label` names a device-trace
// entry for hovers (its top frames, when the caller read them); empty: the entry's size.
HtmlReport snapshot_html_report(const std::string& file, const sim::Snapshot& snapshot,
                                const sim::AllocatorConfig& config, int device_index,
                                const sim::SnapshotReplayReport& first,
                                std::function<std::string(int64_t entry)> entry_label = {});

// Adds the analysis of a real snapshot: categories from its frames and the table of the
// largest live allocations at the peak by call site (html_report_analysis.cc).
void add_snapshot_analysis(HtmlReport& report, const SnapshotAnalysis& analysis, size_t top);

}  // namespace oomcast::advisor
