// The scenario's `parallel:` section: data-parallel engine (DDP, FSDP1, FSDP2, DeepSpeed ZeRO 0-3),
// world size, buckets, sharding, prefetch and CPU offload, with each engine's own key names
// and defaults (../shared/docs/training-memory-model.md §7; docs/scenario-format.md#parallel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenario/mesh_config.h"

namespace oomcast::scenario {

enum class ParallelEngine { None, Ddp, Fsdp, DeepSpeed, Fsdp2 };
enum class FsdpSharding { FullShard, ShardGradOp, NoShard };
enum class FsdpBackwardPrefetch { BackwardPre, BackwardPost, None };
enum class FsdpAutoWrap { Block, None };          // one unit per decoder/encoder block, or the whole model
enum class FloatDtype { Float32, BFloat16, Float16 };
enum class OffloadDevice { None, Cpu };

// torch.nn.parallel.DistributedDataParallel.
struct DdpConfig {
  double bucket_cap_mb = 25.0;                    // DDP's default
  bool gradient_as_bucket_view = false;           // DDP's default: buckets duplicate .grad
};

// torch.distributed.fsdp.FullyShardedDataParallel (FSDP1).
struct FsdpConfig {
  FsdpSharding sharding_strategy = FsdpSharding::FullShard;
  FsdpAutoWrap auto_wrap = FsdpAutoWrap::Block;
  FsdpBackwardPrefetch backward_prefetch = FsdpBackwardPrefetch::BackwardPre;
  bool forward_prefetch = false;
  bool limit_all_gathers = true;
  bool mixed_precision = false;                   // MixedPrecision(...) given
  FloatDtype param_dtype = FloatDtype::Float32;   // MixedPrecision.param_dtype (gathered params)
  FloatDtype reduce_dtype = FloatDtype::Float32;  // MixedPrecision.reduce_dtype (reduce-scatter)
  bool cpu_offload = false;                       // CPUOffload(offload_params=True)
  // use_orig_params=True: the optimizer steps the original parameters (views into the flat
  // shard), so a unit may mix frozen and trainable parameters.
  bool use_orig_params = false;
  // Gradient accumulation under model.no_sync() for every micro-batch but the last: the
  // unsharded gradients stay on the device between micro-batches (planner/parallel/fsdp_rank.cc).
  bool no_sync = false;
};

// torch.distributed.fsdp.fully_shard (FSDP2): per-parameter sharding on dim 0, one
// FSDPParamGroup per fully_shard call (each decoder/encoder block, and the root).
struct Fsdp2Config {
  // fully_shard(reshard_after_forward=...): true frees a block's unsharded parameters after
  // its forward (re-gathered for backward); false keeps them until its backward is done. The
  // root group is never resharded after forward (FSDP2's heuristic for the root).
  bool reshard_after_forward = true;
  bool mixed_precision = false;                   // MixedPrecisionPolicy(...) given
  FloatDtype param_dtype = FloatDtype::Float32;   // MixedPrecisionPolicy.param_dtype (all-gather, compute)
  FloatDtype reduce_dtype = FloatDtype::Float32;  // MixedPrecisionPolicy.reduce_dtype (reduce-scatter)
  // offload_policy=CPUOffloadPolicy(): shards, sharded grads and the optimizer step on the host
  // (pinned: pin_memory=True is its default).
  bool cpu_offload = false;
  // set_requires_gradient_sync(False) for every micro-batch but the last: the unsharded
  // gradients (upcast to reduce_dtype) stay on the device between micro-batches.
  bool no_sync = false;
};

// deepspeed/runtime/zero/offload_config.py: device none|cpu (nvme is not modelled).
struct ZeroOffloadConfig {
  OffloadDevice device = OffloadDevice::None;
  bool pin_memory = false;                        // DeepSpeed's default
};

// deepspeed/runtime/zero/config.py DeepSpeedZeroConfig, in elements where DeepSpeed counts
// elements.
struct ZeroConfig {
  int stage = 0;
  int64_t reduce_bucket_size = 500'000'000;
  int64_t allgather_bucket_size = 500'000'000;
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  int64_t stage3_max_reuse_distance = 1'000'000'000;
  int64_t stage3_param_persistence_threshold = 100'000;
  int64_t sub_group_size = 1'000'000'000;
  bool contiguous_gradients = true;
  bool overlap_comm = false;                      // resolved: DeepSpeed defaults it to (stage == 3)
  ZeroOffloadConfig offload_optimizer;
  ZeroOffloadConfig offload_param;
};

struct DeepSpeedConfig {
  ZeroConfig zero_optimization;
  std::string config_file;                        // the DeepSpeed JSON it came from, if any
};

struct ParallelConfig {
  ParallelEngine engine = ParallelEngine::None;
  int64_t world_size = 1;
  int64_t gpus_per_node = 1;                      // host memory is shared by the ranks of a node
  // NCCL's channel buffers: cudaMalloc'd by NCCL, outside the caching allocator
  // (../shared/docs/training-memory-model.md §8); added to the device's memory held outside the allocator.
  uint64_t nccl_buffer_bytes = 0;
  DdpConfig ddp;
  FsdpConfig fsdp;
  Fsdp2Config fsdp2;
  DeepSpeedConfig deepspeed;
  // Tensor, sequence, pipeline, context and expert parallelism and HSDP's replicas around the
  // engine (scenario/mesh_config.h): the engine shards over data_parallel_shard() ranks.
  MeshConfig mesh;
  // Keys of a DeepSpeed JSON config (or engine options) that are read but not modelled.
  std::vector<std::string> warnings;

  bool enabled() const { return engine != ParallelEngine::None; }
  // The ranks the engine shards over (torchtitan's dp_shard x cp mesh, dp_shard_cp).
  int64_t data_parallel_shard() const {
    return world_size / (mesh.non_data_parallel() * mesh.data_parallel_replicate) * mesh.context_parallel;
  }
};

const char* parallel_engine_name(ParallelEngine engine);
const char* fsdp_sharding_name(FsdpSharding sharding);
uint64_t float_dtype_bytes(FloatDtype dtype);

}  // namespace oomcast::scenario
