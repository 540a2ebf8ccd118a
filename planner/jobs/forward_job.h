// plan_forward_job(): the schedule of a job that only runs forward passes: `job: inference`
// (no_grad / inference_mode, model.eval()) and `job: forward` (grad mode on, no backward, as
// profiling loops do). No optimizer, no gradients; the loop keeps the outputs it binds until
// the next batch rebinds them.
#pragma once

#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Requires scenario.job.job.kind to be Inference or Forward.
PlannedTrace plan_forward_job(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
