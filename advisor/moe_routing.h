// Mixture-of-experts routing is data dependent: `plan` reports the peak of the balanced case
// (every expert gets its share of the tokens) and of the worst case of moe.imbalance (the
// busiest expert gets k times its share, up to all tokens) side by side. The rest of the
// report is the case the scenario's moe.imbalance names (worst unless it says balanced), which
// is also the one search and sweep plan.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "scenario/scenario.h"
#include "sim/trace.h"

namespace oomcast::advisor {

struct Prediction;

struct MoeRoutingCase {
  sim::Bytes peak_allocated_bytes = 0;
  sim::Bytes peak_reserved_bytes = 0;
  bool fits = true;
  int64_t spare_bytes = 0;  // usable - peak reserved; negative when it does not fit
  bool capacity_set = true; // false on a cpu device without a capacity: no spare to speak of
};

struct MoeRoutingCases {
  bool planned = false;  // the model has experts and both cases were planned
  scenario::MoeImbalance reported = scenario::MoeImbalance::Worst;  // the scenario's case: the rest of the report
  MoeRoutingCase balanced;
  MoeRoutingCase worst;
};

// True for a model with mixture-of-experts layers.
bool has_experts(const scenario::ModelConfig& model);

// For a model with experts, plans the case the scenario did not choose and fills
// prediction.moe_routing with both; leaves a dense model's prediction as it is.
void add_moe_routing_cases(Prediction& prediction);

// The report's lines for both cases; empty for a dense model or before add_moe_routing_cases.
std::string moe_routing_text(const Prediction& prediction);

// "moe_routing": {reported, balanced: {...}, worst: {...}}, or null for a dense model.
void add_moe_routing_json(const Prediction& prediction, nlohmann::ordered_json& json);

}  // namespace oomcast::advisor
