// The step-time model: how long one optimizer step of the scenario takes on its device, split
// into forward, backward, recompute of checkpointed blocks, the optimizer step, collectives
// (exposed and total) and offload traffic; plus throughput and model FLOPs utilisation.
// Each op is a roofline on the GPU (op_cost.h) issued by the host (step_time_host.h), the two
// overlapped; docs/step-time.md states the model, its constants and sources, and compares it
// with published training throughputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/checkpointing.h"
#include "planner/layer_graph.h"
#include "planner/parallel/parallel_summary.h"
#include "planner/step_time_result.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Collectives reach ~75% of the link's per-direction bandwidth (nccl-tests all_reduce bus
// bandwidth on DGX A100 NVLink: ~230 of 300 GB/s).
inline constexpr double kCollectivePeakFraction = 0.75;

struct CommunicationTime {
  double seconds = 0.0;          // all collectives of the step on this rank
  double overlappable = 0.0;     // of which can run behind compute (DDP buckets, prefetch)
  double bytes = 0.0;            // bytes this rank sends
  std::string link;              // "NVLink/PCIe in the node" or "inter-node network"
};

// A training step: every micro-batch's forward, backward and recompute, then the optimizer
// step, with the collectives and offload traffic of the scenario's parallel engine.
StepTime estimate_training_step_time(const scenario::Scenario& scenario, const LayerGraph& graph, const ExecutionOrder& order,
                                     const CheckpointPlan& checkpoints, const ParallelSummary& parallel);

// One forward pass (inference or a forward job), per batch.
StepTime estimate_forward_time(const scenario::Scenario& scenario, const LayerGraph& graph);

// The optimizer step as the host issues it and the GPU runs it (step_time_host.h overlaps the
// two).
struct OptimizerStepTime {
  double host_seconds = 0.0;
  double device_seconds = 0.0;
};

// The parts of step_time_states.cc: the optimizer step of the trainable tensors this rank's
// GPU steps (their element counts), and the collectives of the step.
OptimizerStepTime optimizer_step_time(const scenario::Scenario& scenario, const std::vector<uint64_t>& stepped_tensors);
CommunicationTime communication_time(const scenario::Scenario& scenario, uint64_t parameters, uint64_t trainable);

// True for models whose samples are token sequences (seq_len tokens each).
bool counts_tokens(const scenario::Scenario& scenario);

}  // namespace oomcast::planner
