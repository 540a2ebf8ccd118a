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

// One pipeline stage's rank of a model-parallel job (every TP/CP/EP rank of a stage plans
// the same), planned in full.
struct MeshRankSummary {
  int64_t stage = 0;
  int64_t layers = 0;
  int64_t in_flight_microbatches = 1;
  uint64_t parameters = 0;              // on this rank, before the engine's sharding
  uint64_t peak_allocated_bytes = 0;    // of its schedule (live tensor bytes)
  std::string peak_phase;
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
  // Tensor/pipeline/context/expert parallelism (planner/parallel/mesh_rank.h): the mesh, each
  // stage's rank and which one the schedule is of (the busiest).
  std::string mesh;
  std::vector<MeshRankSummary> mesh_ranks;
  int64_t planned_stage = -1;
};

}  // namespace oomcast::planner
