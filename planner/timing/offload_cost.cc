// PCIe traffic per step, engine by engine:
// - DeepSpeed offload_optimizer: each micro-batch copies this rank's reduced grad partition to
//   the host (16-bit, DeepSpeed casts into the pinned fp32 buffer); after the CPU step the
//   updated 16-bit partition comes back.
// - DeepSpeed offload_param (ZeRO-3): every gather reads the shard from the host: forward,
//   backward and, with full checkpointing, the recompute.
// - FSDP CPUOffload: the same per gather, and the sharded grads go to the host.
// Compute: 6 FLOPs per parameter per token (forward 2, backward 4), 8 with full
// checkpointing (one more forward), over peak x MFU.
#include "planner/timing/offload_cost.h"

#include <algorithm>

#include "planner/precision.h"

namespace oomcast::planner {

using scenario::CheckpointMode;
using scenario::FsdpSharding;
using scenario::OffloadDevice;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Scenario;
using scenario::ZeroConfig;

OffloadCost estimate_offload_cost(const Scenario& scenario, uint64_t parameters) {
  OffloadCost cost;
  const ParallelConfig& parallel = scenario.parallel;
  const auto micro_batches = static_cast<uint64_t>(std::max<int64_t>(1, scenario.grad_accum_steps));
  const auto world = static_cast<uint64_t>(std::max<int64_t>(1, parallel.world_size));
  const uint64_t partition = (parameters + world - 1) / world;
  const uint64_t param_bytes = dtype_bytes(precision_rules(scenario.precision).parameter_dtype);
  const bool recompute = scenario.checkpointing.mode == CheckpointMode::Full;
  const uint64_t gathers_per_micro_batch = recompute ? 3 : 2;
  if (parallel.engine == ParallelEngine::DeepSpeed) {
    const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
    if (zero.offload_optimizer.device == OffloadDevice::Cpu && zero.stage >= 1) {
      cost.device_to_host_bytes += micro_batches * param_bytes * partition;
      cost.host_to_device_bytes += param_bytes * partition;
    }
    if (zero.offload_param.device == OffloadDevice::Cpu && zero.stage == 3) {
      cost.host_to_device_bytes += micro_batches * gathers_per_micro_batch * param_bytes * partition;
    }
  } else if (parallel.engine == ParallelEngine::Fsdp && parallel.fsdp.cpu_offload) {
    const uint64_t storage = parallel.fsdp.mixed_precision ? 4 : param_bytes;
    const uint64_t held = parallel.fsdp.sharding_strategy == FsdpSharding::NoShard ? parameters : partition;
    cost.host_to_device_bytes += micro_batches * gathers_per_micro_batch * storage * held;
    cost.device_to_host_bytes += micro_batches * storage * held;
  }
  if (parallel.engine == ParallelEngine::Fsdp2 && parallel.fsdp2.cpu_offload) {
    // Each all-gather copies the shard in (once per micro-batch without reshard_after_forward,
    // twice with it); each reduce-scatter copies the grad shard out.
    const uint64_t storage = parallel.fsdp2.mixed_precision ? 4 : param_bytes;
    const uint64_t gathers = parallel.fsdp2.reshard_after_forward ? 2 : 1;
    cost.host_to_device_bytes += micro_batches * gathers * storage * partition;
    cost.device_to_host_bytes += micro_batches * storage * partition;
  }
  cost.host_link_gbps = scenario.device.host_link_gbps;
  if (cost.host_link_gbps > 0.0) {
    cost.transfer_seconds =
        static_cast<double>(cost.host_to_device_bytes + cost.device_to_host_bytes) / (cost.host_link_gbps * 1e9);
  }
  cost.model_flops_utilization = kAssumedMfu;
  if (scenario.device.peak_tflops > 0.0) {
    double tokens = static_cast<double>(scenario.batch_size) * static_cast<double>(std::max<int64_t>(1, scenario.seq_len)) *
                    static_cast<double>(micro_batches);
    double flops_per_token = (recompute ? 8.0 : 6.0) * static_cast<double>(parameters);
    cost.compute_seconds = flops_per_token * tokens / (scenario.device.peak_tflops * 1e12 * kAssumedMfu);
  }
  return cost;
}

}  // namespace oomcast::planner
