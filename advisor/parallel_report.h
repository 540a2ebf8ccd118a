// The data-parallel part of `oomcast plan`'s report: engine, per-rank model states, host RAM
// beside GPU memory, NCCL buffers, the offload-cost estimate and warnings, as text and JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "advisor/predict.h"

namespace oomcast::advisor {

// Lines for the text report's header block; "" when the scenario has no parallel engine.
std::string parallel_text(const Prediction& prediction);

// Adds host_bytes, warnings and a "parallel" object to the plan JSON (host_bytes is 0 and
// warnings empty for single-process jobs, so scripts can read them unconditionally).
void add_parallel_json(const Prediction& prediction, nlohmann::ordered_json& json);

}  // namespace oomcast::advisor
