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

struct StepTime {
  bool modelled = false;
  std::string not_modelled;      // why not (no throughput figures for the device, a job kind)
  int64_t micro_batches = 1;
  double forward_seconds = 0.0;  // every micro-batch of the step
  double backward_seconds = 0.0;
  double recompute_seconds = 0.0;
  double optimizer_seconds = 0.0;
  double communication_seconds = 0.0;          // all collectives
  double communication_exposed_seconds = 0.0;  // what compute does not hide
  std::string communication_link;
  double offload_seconds = 0.0;  // PCIe transfers and the host optimizer step, not overlapped
  double step_seconds = 0.0;
  double model_flops = 0.0;      // forward + backward FLOPs of the step on this rank, no recompute
  double model_flops_utilization = 0.0;  // model_flops / (step_seconds × dense 16-bit peak)
  double samples_per_step = 0.0; // on this rank
  double tokens_per_step = 0.0;  // on this rank; 0 for models without tokens (vision, mlp)
  int64_t ranks = 1;
  uint64_t ops_without_flops = 0;  // matmul-class ops timed by their bytes (FLOPs unknown)
  // Generation (`job: generate`, generation_time.h): step_seconds is the whole generate()
  // call, prefill plus decode; tokens_per_step the tokens it generates.
  bool generation = false;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;   // every decode step
  int64_t decode_steps = 0;      // new_tokens - 1 (the prefill makes the first token)
  int64_t sequences = 0;         // generated in parallel
  double decode_seconds_per_step() const { return decode_steps > 0 ? decode_seconds / static_cast<double>(decode_steps) : 0.0; }
  // Tokens per second of the decode steps alone, all sequences.
  double decode_tokens_per_second() const {
    const double per_step = decode_seconds_per_step();
    return per_step > 0.0 ? static_cast<double>(sequences) / per_step : 0.0;
  }
  // Per checkpoint unit, one micro-batch: the forward time of its ops (what recomputing it
  // whole costs) — the cost side of checkpointing: auto.
  std::vector<double> unit_forward_seconds;

  double samples_per_second() const { return step_seconds > 0.0 ? samples_per_step / step_seconds : 0.0; }
  double tokens_per_second() const { return step_seconds > 0.0 ? tokens_per_step / step_seconds : 0.0; }
};

// A training step: every micro-batch's forward, backward and recompute, then the optimizer
// step, with the collectives and offload traffic of the scenario's parallel engine.
StepTime estimate_training_step_time(const Scenario& scenario, const LayerGraph& graph, const ExecutionOrder& order,
                                     const CheckpointPlan& checkpoints, const ParallelSummary& parallel);

// One forward pass (inference or a forward job), per batch.
StepTime estimate_forward_time(const Scenario& scenario, const LayerGraph& graph);

// The optimizer step as the host issues it and the GPU runs it (step_time_host.h overlaps the
// two).
struct OptimizerStepTime {
  double host_seconds = 0.0;
  double device_seconds = 0.0;
};

// The parts of step_time_states.cc: the optimizer step of the trainable tensors this rank's
// GPU steps (their element counts), and the collectives of the step.
OptimizerStepTime optimizer_step_time(const Scenario& scenario, const std::vector<uint64_t>& stepped_tensors);
CommunicationTime communication_time(const Scenario& scenario, uint64_t parameters, uint64_t trainable);

// True for models whose samples are token sequences (seq_len tokens each).
bool counts_tokens(const Scenario& scenario);

}  // namespace oomcast::planner
