// plan_generate_job(): the schedule of model.generate() with a KV cache (`job: generate`):
// the prefill forward over the prompt, then one forward per new token over the cache.
#pragma once

#include "planner/jobs/decode_steps.h"
#include "planner/planned_trace.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Requires scenario.job.job.kind == Generate and a decoder family. At most
// `max_planned_decode_steps` decode steps are planned (decode_steps.h); the others are
// skipped and the cache grown by them. Each planned step is the phase iter{t}/decode.
PlannedTrace plan_generate_job(const scenario::Scenario& scenario,
                               int64_t max_planned_decode_steps = kMaxPlannedDecodeSteps);

}  // namespace oomcast::planner
