// What a prediction says about a data-parallel rank beyond the GPU schedule: the engine, the
// per-rank model states, host RAM of offloaded states, NCCL buffers and the offload cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/parallel/model_states.h"

namespace oomcast::planner {

// Estimated PCIe traffic of offloading against estimated compute, per optimizer step.
struct OffloadCost {
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_bytes = 0;
  double host_link_gbps = 0.0;         // the device profile's effective host link
  double transfer_seconds = 0.0;       // (h2d + d2h) / link, 0 when the link is unknown
  double compute_seconds = 0.0;        // 6 * params * tokens / (peak * MFU)
  double model_flops_utilization = 0.4;
};

struct ParallelSummary {
  bool enabled = false;
  std::string description;             // "DeepSpeed ZeRO-3, 8 ranks, offload_optimizer cpu (pinned)"
  int64_t world_size = 1;
  int64_t gpus_per_node = 1;
  ModelSizes sizes;
  ModelStateBytes model_states;        // per rank
  uint64_t host_bytes = 0;             // per rank, steady, pinned or pageable
  bool host_pinned = false;
  uint64_t host_bytes_per_node = 0;
  uint64_t host_load_peak_per_node = 0;
  uint64_t nccl_buffer_bytes = 0;      // outside the allocator, included in the device's context figure
  bool offloads = false;
  OffloadCost offload;
  std::vector<std::string> warnings;   // keys read but not modelled
};

}  // namespace oomcast::planner
