// plan_mesh_job(): a training job with tensor, sequence, pipeline, context or expert
// parallelism, planned per rank: every pipeline stage's rank is planned (the TP, CP and EP
// ranks of a stage run the same shapes), and the schedule returned is the busiest one's.
#pragma once

#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Throws InputError for a job other than training (the mesh is modelled for training).
PlannedTrace plan_mesh_job(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
