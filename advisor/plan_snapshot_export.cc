// Frames from the planner's names; the device is the scenario's own, as in predict().
#include "advisor/plan_snapshot_export.h"

#include "base/input_error.h"

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;
using planner::category_name;
using scenario::Scenario;

namespace {

const std::string& name_at(const PlannedTrace& planned, uint32_t index) {
  static const std::string empty;
  return index < planned.names.size() ? planned.names[index] : empty;
}

}  // namespace

void planned_frames(const PlannedTrace& planned, size_t event, std::vector<sim::SnapshotFrame>& frames) {
  if (event >= planned.info.size()) return;
  const EventInfo& info = planned.info[event];
  const std::string& op = name_at(planned, info.op);
  const std::string& tensor = name_at(planned, info.tensor);
  frames.push_back({op.empty() ? std::string("(no op)") : op,
                    (tensor.empty() ? std::string("(tensor)") : tensor) + " [" + category_name(info.category) + "]", 0});
  const std::string& phase = name_at(planned, info.phase);
  frames.push_back({phase.empty() ? std::string("(no phase)") : phase,
                    "oomcast schedule, iteration " + std::to_string(info.iteration), info.iteration});
}

sim::SnapshotExport export_plan_snapshot(const std::string& path, const Scenario& scenario,
                                         const PlannedTrace& planned) {
  if (scenario.device.is_cpu)
    throw InputError({path, 0, 0, -1}, "--export-snapshot",
                     "the cpu device has no caching allocator to snapshot; use a CUDA device profile");
  return sim::export_snapshot(path, planned.trace, scenario.allocator, scenario.device.model,
                              [&planned](size_t event, std::vector<sim::SnapshotFrame>& frames) {
                                planned_frames(planned, event, frames);
                              });
}

}  // namespace oomcast::advisor
