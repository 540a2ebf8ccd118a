// plan_steps(): Scenario -> the op-by-op allocation schedule of N training iterations as a
// sim::Trace, with the iteration, phase, op, tensor and category of every event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Builds the schedule. Throws InputError for a scenario the model family cannot honour.
PlannedTrace plan_steps(const scenario::Scenario& scenario);

// The layer graph one training micro-batch runs (what plan_steps schedules).
LayerGraph build_training_graph(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
