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
  // Ψ_t: elements with requires_grad (all of Ψ unless training.trainable or LoRA freezes some).
  // Only these get gradients, master copies and optimizer state.
  uint64_t trainable_parameters = 0;
  // Bytes of all parameters and of the trainable ones in the dtypes the model holds them in
  // (weights.format, fp32 adapters): what DDP keeps, where no engine casts them.
  uint64_t parameter_bytes = 0;
  uint64_t trainable_bytes = 0;
  // FSDP: elements of the units whose flat parameter holds a trainable parameter; such a
  // unit's flat gradient (and sharded .grad) covers the whole unit, frozen parts included.
  uint64_t gradient_unit_parameters = 0;
  // FSDP: trainable elements inside the planned rank's shards (the rank holding the most).
  uint64_t rank_trainable_shard = 0;
  // FSDP2: elements of all parameters' padded dim-0 shards on the planned rank (rank 0).
  uint64_t rank_parameter_shard = 0;
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
uint64_t optimizer_moment_bytes(const scenario::OptimizerConfig& optimizer);

ModelStateBytes model_state_bytes(const scenario::ParallelConfig& parallel, scenario::Precision precision,
                                  const scenario::OptimizerConfig& optimizer, const ModelSizes& sizes);

}  // namespace oomcast::planner
