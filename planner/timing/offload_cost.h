// Offload cost estimate: bytes an offloading rank moves over PCIe per optimizer step, divided
// by the device's effective host-link bandwidth, set against an estimated compute time.
#pragma once

#include "planner/parallel/parallel_summary.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Model FLOPs utilization assumed for the compute-time estimate (typical of well-tuned
// data-parallel LLM training; MFU 0.3-0.5 is the range large-scale reports give).
inline constexpr double kAssumedMfu = 0.4;

OffloadCost estimate_offload_cost(const scenario::Scenario& scenario, uint64_t parameters);

}  // namespace oomcast::planner
