// Names of the parallel-section choices as scenario files spell them, and dtype sizes.
#include "scenario/parallel_config.h"

namespace oomcast::scenario {

const char* parallel_engine_name(ParallelEngine engine) {
  switch (engine) {
    case ParallelEngine::None: return "none";
    case ParallelEngine::Ddp: return "ddp";
    case ParallelEngine::Fsdp: return "fsdp";
    case ParallelEngine::DeepSpeed: return "deepspeed";
    case ParallelEngine::Fsdp2: return "fsdp2";
  }
  return "?";
}

const char* fsdp_sharding_name(FsdpSharding sharding) {
  switch (sharding) {
    case FsdpSharding::FullShard: return "FULL_SHARD";
    case FsdpSharding::ShardGradOp: return "SHARD_GRAD_OP";
    case FsdpSharding::NoShard: return "NO_SHARD";
  }
  return "?";
}

uint64_t float_dtype_bytes(FloatDtype dtype) { return dtype == FloatDtype::Float32 ? 4 : 2; }

}  // namespace oomcast::scenario
