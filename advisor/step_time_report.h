// The step-time part of `oomcast plan`'s report: step time with its split (forward,
// backward, recompute, optimizer, communication, offload), throughput and MFU, as text and JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "advisor/predict.h"
#include "planner/timing/step_time.h"

namespace oomcast::advisor {

// "step time  1.23 s ..." lines for the text report, ending with a newline.
std::string step_time_text(const Prediction& prediction);

// Adds the "step_time" object to the plan JSON: modelled, not_modelled, step_seconds,
// forward_seconds, backward_seconds, recompute_seconds, optimizer_seconds,
// communication_seconds, communication_exposed_seconds, offload_seconds, offload_overlapped,
// micro_batches, ranks, samples_per_second, tokens_per_second (per GPU; null for models without
// tokens), job_tokens_per_second, model_flops_utilization, ops_without_flops, generation:
// {prefill_seconds, decode_seconds, decode_steps, decode_seconds_per_step,
// decode_tokens_per_second, sequences} for a generate job, else null.
void add_step_time_json(const Prediction& prediction, nlohmann::ordered_json& json);

// The same object for a StepTime alone (whatif rows reuse it).
nlohmann::ordered_json step_time_json(const planner::StepTime& time);

// "1.23 s" / "45.6 ms" / "789 µs".
std::string seconds_text(double seconds);

}  // namespace oomcast::advisor
