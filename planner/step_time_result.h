// StepTime: the step-time model's answer (planner/timing/step_time.h) as the plan carries it.
// Its own header below timing/ so that PlannedTrace, which the schedule's writers include,
// can hold it without the memory schedule including the model that computes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::planner {

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

}  // namespace oomcast::planner
