// `plan --export-snapshot FILE.pickle`: the planned run written as a PyTorch memory snapshot
// (sim/snapshot_export.h), its frames naming what the planner knows of each allocation: the
// op, the tensor and its category, the phase and the iteration.
#pragma once

#include <string>
#include <vector>

#include "advisor/predict.h"
#include "sim/snapshot_export.h"

namespace oomcast::advisor {

// The frames of event `event`, innermost first: {op, "tensor [category]", 0}, then
// {phase, "oomcast schedule, iteration N", N}.
void planned_frames(const planner::PlannedTrace& planned, size_t event, std::vector<sim::SnapshotFrame>& frames);

// Replays the schedule on the scenario's device (so a step that does not fit ends with the
// oom entry PyTorch would record) and writes the snapshot. Throws InputError for the cpu
// device, which has no caching allocator to snapshot.
sim::SnapshotExport export_plan_snapshot(const std::string& path, const scenario::Scenario& scenario,
                                         const planner::PlannedTrace& planned);

}  // namespace oomcast::advisor
