// Per-rank model-state bytes of a data-parallel job (parameters, gradients, optimizer states,
// the gathered working set, and host memory under offload), from the engine's partitioning
// rules (../shared/docs/training-memory-model.md §7). The schedule allocates the same pieces; tests compare
// these figures with DeepSpeed's estimators and the ZeRO paper.
#pragma once

#include <cstdint>

#include "scenario/scenario.h"

namespace oomcast::planner {

struct ModelSizes {
  uint64_t parameters = 0;                // Ψ, shared parameters counted once
  uint64_t largest_layer_parameters = 0;  // the largest module's own parameters (DeepSpeed's "largest layer")
  uint64_t largest_unit_parameters = 0;   // the largest FSDP unit (block, or the root's leftovers)
};

// Bytes on one rank. "Partition" P = ceil(Ψ / world_size) elements.
struct ModelStateBytes {
  uint64_t parameters = 0;            // resident on the GPU: the full model or this rank's shard
  uint64_t gradients = 0;             // resident gradients between backward and step (GPU)
  uint64_t full_gradients = 0;        // the 16-bit grads autograd produces for the whole model, before bucketing
  uint64_t optimizer = 0;             // GPU: fp32 master weights + optimizer moments
  uint64_t step_fp32_gradients = 0;   // fp32 copy of the grad partition made for the step (GPU, transient)
  uint64_t gathered_working_set = 0;  // ZeRO-3/FSDP: the largest module/unit gathered, params + its grads
  uint64_t host_per_rank = 0;         // steady host RAM of offloaded states, per rank
  uint64_t host_load_peak_per_node = 0;  // host RAM while each rank of a node builds its model (fp32)
  uint64_t host_per_node(int64_t gpus_per_node) const {
    return host_per_rank * static_cast<uint64_t>(gpus_per_node);
  }
};

// Bytes per element the optimizer keeps besides the master copy (Adam/AdamW: m and v in fp32).
uint64_t optimizer_moment_bytes(const OptimizerConfig& optimizer);

ModelStateBytes model_state_bytes(const ParallelConfig& parallel, Precision precision,
                                  const OptimizerConfig& optimizer, const ModelSizes& sizes);

}  // namespace oomcast::planner
