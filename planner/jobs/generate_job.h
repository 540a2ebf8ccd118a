// plan_generate_job(): the schedule of model.generate() with a KV cache (`job: generate`):
// the prefill forward over the prompt, then one forward per new token over the cache.
#pragma once

#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Requires scenario.job.job.kind == Generate and a decoder family.
PlannedTrace plan_generate_job(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
