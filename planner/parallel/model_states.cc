// Model-state bytes per rank, engine by engine. DeepSpeed: stage_1_and_2.py / stage3.py keep
// 16-bit params, a 16-bit grad partition, an fp32 master partition and fp32 Adam moments;
// the step casts the grad partition to fp32. FSDP keeps flat-parameter shards in the
// original dtype and gathers them in MixedPrecision.param_dtype.
#include "planner/parallel/model_states.h"

#include <algorithm>

#include "planner/precision.h"

namespace oomcast::planner {

using scenario::Fsdp2Config;
using scenario::FsdpConfig;
using scenario::FsdpSharding;
using scenario::OffloadDevice;
using scenario::OptimizerConfig;
using scenario::OptimizerType;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Precision;
using scenario::ZeroConfig;
using scenario::float_dtype_bytes;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// optimizer_moment_bytes is per fp32 element: torch.optim's states are zeros_like(the stepped
// tensor), so a bf16 parameter stepped without a master copy has bf16 moments. bitsandbytes'
// 8-bit states are bytes whatever the parameter's dtype.
uint64_t moments_at(const OptimizerConfig& optimizer, uint64_t moments, uint64_t stepped_bytes) {
  return optimizer.type == OptimizerType::AdamW8bit ? moments : moments * stepped_bytes / 4;
}

ModelStateBytes deepspeed_states(const ZeroConfig& zero, uint64_t param_bytes, uint64_t moments,
                                 const ModelSizes& sizes, uint64_t world, uint64_t gpus_per_node) {
  // Frozen parameters are partitioned and gathered like the others (stage 3) but DeepSpeed
  // builds its flat groups, masters, moments and gradient partitions from the requires_grad
  // parameters only (stage_1_and_2.py bit16_groups, stage3.py _get_trainable_parameter_groups).
  const uint64_t psi = sizes.parameters;
  const uint64_t trainable = sizes.trainable_parameters;
  const uint64_t partition = ceil_div(trainable, world);
  const uint64_t master_and_moments = 4 + moments;
  ModelStateBytes bytes;
  bytes.full_gradients = param_bytes * trainable;
  // Every rank builds the model in fp32 on the host before deepspeed.initialize partitions it;
  // ZeRO-3 models are built under deepspeed.zero.Init, one module at a time.
  bytes.host_load_peak_per_node =
      4 * (zero.stage == 3 ? sizes.largest_layer_parameters : psi) * gpus_per_node;
  const bool offload_optimizer = zero.offload_optimizer.device == OffloadDevice::Cpu && zero.stage >= 1;
  const bool offload_param = zero.offload_param.device == OffloadDevice::Cpu && zero.stage == 3;
  switch (zero.stage) {
    case 0:
      bytes.parameters = param_bytes * psi;
      bytes.gradients = param_bytes * trainable;
      bytes.optimizer = (param_bytes == 4 ? 0 : 4) * trainable + moments * trainable;
      bytes.step_fp32_gradients = param_bytes == 4 ? 0 : 4 * trainable;
      return bytes;
    case 1:
      bytes.parameters = param_bytes * psi;
      bytes.gradients = param_bytes * trainable;  // kept whole until the step reduces them
      break;
    case 2:
      bytes.parameters = param_bytes * psi;
      bytes.gradients = param_bytes * partition;
      break;
    default:
      bytes.parameters = param_bytes * ceil_div(psi, world);
      bytes.gradients = param_bytes * partition;
      // The largest module gathered whole, and its whole gradient before reduce-scatter.
      bytes.gathered_working_set = 2 * param_bytes * sizes.largest_layer_parameters;
      break;
  }
  bytes.optimizer = master_and_moments * partition;
  const uint64_t step_tile = zero.stage == 3 ? std::min<uint64_t>(partition, static_cast<uint64_t>(zero.sub_group_size))
                                              : partition;
  bytes.step_fp32_gradients = 4 * step_tile;
  if (offload_optimizer) {
    // ZeRO-Offload: master, moments and the fp32 grads live on the host; the GPU's grad
    // partition is replaced by copies into the host buffer bucket by bucket.
    bytes.host_per_rank += (master_and_moments + 4) * partition;
    bytes.optimizer = 0;
    bytes.step_fp32_gradients = 0;
    if (zero.stage >= 2) bytes.gradients = 0;
  }
  if (offload_param) {
    bytes.host_per_rank += param_bytes * ceil_div(psi, world);
    bytes.parameters = 0;
  }
  return bytes;
}

ModelStateBytes fsdp_states(const FsdpConfig& fsdp, uint64_t storage_bytes, uint64_t gathered_bytes,
                            bool master_copies, uint64_t moments, const ModelSizes& sizes, uint64_t world,
                            uint64_t gpus_per_node) {
  const uint64_t psi = sizes.parameters;
  const bool sharded = fsdp.sharding_strategy != FsdpSharding::NoShard;
  const uint64_t held = sharded ? ceil_div(psi, world) : psi;
  const uint64_t graded = sizes.gradient_unit_parameters;
  ModelStateBytes bytes;
  bytes.parameters = storage_bytes * held;
  bytes.gradients = storage_bytes * (sharded ? ceil_div(graded, world) : graded);
  bytes.full_gradients = gathered_bytes * graded;
  // use_orig_params: state per trainable piece of the rank's slices; otherwise per flat shard
  // of each trainable unit (a mixed unit is refused).
  const uint64_t stepped = fsdp.use_orig_params ? sizes.rank_trainable_shard : (sharded ? ceil_div(graded, world) : graded);
  bytes.optimizer = ((master_copies ? 4 : 0) + moments) * stepped;
  bytes.host_load_peak_per_node = 4 * psi * gpus_per_node;
  if (fsdp.sharding_strategy == FsdpSharding::FullShard) {
    bytes.gathered_working_set = 2 * gathered_bytes * sizes.largest_unit_parameters;
  } else if (fsdp.sharding_strategy == FsdpSharding::ShardGradOp) {
    // Unsharded from forward until each unit's backward: the whole model at the turn.
    bytes.gathered_working_set = gathered_bytes * psi + gathered_bytes * sizes.largest_unit_parameters;
  }
  if (fsdp.cpu_offload) {
    // CPUOffload(offload_params=True): shards, sharded grads and the optimizer step on the host.
    bytes.host_per_rank = bytes.parameters + bytes.gradients + bytes.optimizer;
    bytes.parameters = bytes.gradients = bytes.optimizer = 0;
  }
  return bytes;
}

// FSDP2: every parameter sharded on dim 0 (planner/parallel/fsdp2_shards.h); grads and
// optimizer state only for the trainable ones.
ModelStateBytes fsdp2_states(const Fsdp2Config& fsdp2, uint64_t storage_bytes, uint64_t gathered_bytes,
                             bool master_copies, uint64_t moments, const ModelSizes& sizes, uint64_t gpus_per_node) {
  ModelStateBytes bytes;
  bytes.parameters = storage_bytes * sizes.rank_parameter_shard;
  bytes.gradients = storage_bytes * sizes.rank_trainable_shard;
  bytes.full_gradients = gathered_bytes * sizes.trainable_parameters;
  bytes.optimizer = ((master_copies ? 4 : 0) + moments) * sizes.rank_trainable_shard;
  bytes.host_load_peak_per_node = 4 * sizes.parameters * gpus_per_node;
  // Two groups' unsharded parameters (one computing, one gathered ahead), or with
  // reshard_after_forward false the whole model at the turn from forward to backward.
  bytes.gathered_working_set = fsdp2.reshard_after_forward
                                   ? 2 * gathered_bytes * sizes.largest_unit_parameters
                                   : gathered_bytes * (sizes.parameters + sizes.largest_unit_parameters);
  if (fsdp2.cpu_offload) {
    // CPUOffloadPolicy: shards, sharded grads and the optimizer step on the host.
    bytes.host_per_rank = bytes.parameters + bytes.gradients + bytes.optimizer;
    bytes.parameters = bytes.gradients = bytes.optimizer = 0;
  }
  return bytes;
}

}  // namespace

uint64_t optimizer_moment_bytes(const OptimizerConfig& optimizer) {
  switch (optimizer.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW: return optimizer.amsgrad ? 12 : 8;
    case OptimizerType::Sgd: return optimizer.momentum > 0.0 ? 4 : 0;
    case OptimizerType::AdamW8bit: return 2;   // one byte per moment; block scales are ~1.6%
    case OptimizerType::Adafactor: return 0;   // factored row/column statistics: negligible per element
    case OptimizerType::Muon: return 4;        // one momentum buffer (the AdamW-stepped rest taken as Muon's)
    case OptimizerType::AnyPrecisionAdamW:
      return (optimizer.momentum_fp32 ? 4 : 2) + (optimizer.variance_fp32 ? 4 : 2) +
             (optimizer.kahan_summation ? (optimizer.compensation_fp32 ? 4 : 2) : 0);
  }
  return 8;
}

ModelStateBytes model_state_bytes(const ParallelConfig& parallel, const PrecisionRules& rules,
                                  const OptimizerConfig& optimizer, const ModelSizes& sizes) {
  const uint64_t param_bytes = dtype_bytes(rules.parameter_dtype);
  const uint64_t moments = optimizer_moment_bytes(optimizer);
  const auto world = static_cast<uint64_t>(std::max<int64_t>(1, parallel.world_size));
  const auto gpus_per_node = static_cast<uint64_t>(std::max<int64_t>(1, parallel.gpus_per_node));
  switch (parallel.engine) {
    case ParallelEngine::DeepSpeed:
      return deepspeed_states(parallel.deepspeed.zero_optimization, param_bytes, moments, sizes, world, gpus_per_node);
    case ParallelEngine::Fsdp: {
      const FsdpConfig& fsdp = parallel.fsdp;
      uint64_t storage = fsdp.mixed_precision ? 4 : param_bytes;
      uint64_t gathered = fsdp.mixed_precision ? float_dtype_bytes(fsdp.param_dtype) : param_bytes;
      bool masters = !fsdp.mixed_precision && rules.fp32_master_weights;
      const uint64_t stepped = masters ? 4 : storage;
      return fsdp_states(fsdp, storage, gathered, masters, moments_at(optimizer, moments, stepped), sizes, world,
                         gpus_per_node);
    }
    case ParallelEngine::Fsdp2: {
      const Fsdp2Config& fsdp2 = parallel.fsdp2;
      uint64_t storage = fsdp2.mixed_precision ? 4 : param_bytes;
      uint64_t gathered = fsdp2.mixed_precision ? float_dtype_bytes(fsdp2.param_dtype) : param_bytes;
      bool masters = !fsdp2.mixed_precision && rules.fp32_master_weights;
      const uint64_t stepped = masters ? 4 : storage;
      return fsdp2_states(fsdp2, storage, gathered, masters, moments_at(optimizer, moments, stepped), sizes,
                          gpus_per_node);
    }
    case ParallelEngine::Ddp:
    case ParallelEngine::None: {
      // DDP's Reducer and the optimizer see only the requires_grad parameters.
      ModelStateBytes bytes;
      const uint64_t psi = sizes.parameters;
      const uint64_t trainable = sizes.trainable_parameters;
      bytes.parameters = sizes.parameter_bytes;
      bytes.gradients = sizes.trainable_bytes;
      bytes.full_gradients = sizes.trainable_bytes;
      // Without masters each parameter is stepped in its own dtype (LoRA's fp32 adapters on a
      // bf16 base included): the moments scale with the trainable bytes.
      bytes.optimizer = rules.fp32_master_weights ? (4 + moments) * trainable
                                                  : (optimizer.type == OptimizerType::AdamW8bit
                                                         ? moments * trainable
                                                         : moments * sizes.trainable_bytes / 4);
      bytes.step_fp32_gradients = rules.fp32_master_weights ? 4 * trainable : 0;
      bytes.host_load_peak_per_node = 4 * psi * gpus_per_node;
      return bytes;
    }
  }
  return {};
}

}  // namespace oomcast::planner
