// The step-time walk: every op's forward and backward as a roofline on the GPU (op_cost.h)
// and a host dispatch cost (step_time_host.h), issued in the order a micro-batch runs them
// (forward, then backward in reverse with each checkpointed unit's recompute before it)
// through the host/GPU pipeline; then the optimizer step, the collectives (overlapped with
// compute where the engine overlaps them) and the offload traffic, which is taken as not
// overlapped (an upper bound: DeepSpeed overlaps part of the gradient copies with backward).
#include "planner/timing/step_time.h"

#include <algorithm>

#include "planner/timing/op_cost.h"
#include "planner/timing/step_time_host.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::DeviceThroughput;
using scenario::FsdpSharding;
using scenario::OffloadDevice;
using scenario::OpKind;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Scenario;
using scenario::ZeroConfig;

namespace {

// The host's share of DRAM bandwidth for one rank's CPU optimizer step: a two-socket server
// streams ~200 GB/s, shared by its eight GPUs' processes (an assumption; docs/step-time.md).
constexpr double kHostOptimizerGbps = 25.0;
// CPU Adam reads parameter, gradient and two moments and writes three, all fp32.
constexpr double kHostAdamBytesPerElement = 28.0;

bool optimizer_offloaded(const ParallelConfig& parallel) {
  if (parallel.engine == ParallelEngine::DeepSpeed) {
    const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
    return zero.stage >= 1 && zero.offload_optimizer.device == OffloadDevice::Cpu;
  }
  if (parallel.engine == ParallelEngine::Fsdp2) return parallel.fsdp2.cpu_offload;
  return parallel.engine == ParallelEngine::Fsdp && parallel.fsdp.cpu_offload;
}

bool shards_optimizer(const ParallelConfig& parallel) {
  if (parallel.engine == ParallelEngine::DeepSpeed) return parallel.deepspeed.zero_optimization.stage >= 1;
  if (parallel.engine == ParallelEngine::Fsdp2) return true;  // fully_shard always shards the optimizer state
  return parallel.engine == ParallelEngine::Fsdp && parallel.fsdp.sharding_strategy != FsdpSharding::NoShard;
}

double mfu_peak_tflops(const Scenario& s) {
  const PrecisionRules rules = job_precision_rules(s);
  DType dtype = rules.autocast ? rules.low_dtype : rules.parameter_dtype;
  return matmul_peak_tflops(dtype, OpKind::Linear, s.device.throughput);
}

StepTime unmodelled(const Scenario& s, std::string why) {
  StepTime time;
  time.not_modelled = std::move(why);
  (void)s;
  return time;
}

}  // namespace

bool counts_tokens(const Scenario& s) {
  const std::string& family = s.model.family;
  return family != "resnet" && family != "vit" && family != "mlp";
}

namespace {

enum class Phase : uint8_t { Forward, Recompute, Backward };

// One op of a micro-batch as the pipeline sees it.
struct IssuedOp {
  double host = 0.0;
  double device = 0.0;
  Phase phase = Phase::Forward;
  int32_t unit = -1;
};

// A micro-batch in the order it runs: the forward ops, then the backward nodes in reverse,
// each checkpointed unit's recompute just before the first backward node of that unit.
std::vector<IssuedOp> micro_batch_ops(const LayerGraph& graph, const CheckpointPlan& checkpoints,
                                      const DeviceThroughput& device, double* flops, uint64_t* without_flops) {
  std::vector<IssuedOp> forward, backward;
  std::vector<std::vector<IssuedOp>> recompute(static_cast<size_t>(std::max(0, graph.num_units)));
  std::vector<int32_t> backward_unit;
  for (size_t index = 0; index < graph.ops.size(); ++index) {
    const OpNode& op = graph.ops[index];
    OpCost forward_op = forward_cost(graph, op);
    OpCost backward_op = backward_cost(graph, op);
    IssuedOp issued{forward_host_seconds(op, forward_op), kernel_seconds(forward_op, op.kind, device), Phase::Forward,
                    op.unit};
    forward.push_back(issued);
    *flops += forward_op.flops + backward_op.flops;
    if (forward_op.matmul_class && !forward_op.flops_known) ++*without_flops;
    const bool recomputed = index < checkpoints.recomputed.size() && checkpoints.recomputed[index];
    if (recomputed && op.unit >= 0 && static_cast<size_t>(op.unit) < recompute.size()) {
      IssuedOp again = issued;
      again.phase = Phase::Recompute;
      recompute[static_cast<size_t>(op.unit)].push_back(again);
    }
    if (backward_op.kernels > 0.0) {
      backward.push_back({backward_host_seconds(backward_op), kernel_seconds(backward_op, op.kind, device),
                          Phase::Backward, op.unit});
    }
  }
  std::vector<IssuedOp> ops = forward;
  std::vector<bool> recomputed_unit(recompute.size(), false);
  for (auto it = backward.rbegin(); it != backward.rend(); ++it) {
    if (it->unit >= 0 && static_cast<size_t>(it->unit) < recompute.size() && !recomputed_unit[static_cast<size_t>(it->unit)]) {
      recomputed_unit[static_cast<size_t>(it->unit)] = true;
      const auto& unit_ops = recompute[static_cast<size_t>(it->unit)];
      ops.insert(ops.end(), unit_ops.begin(), unit_ops.end());
    }
    ops.push_back(*it);
  }
  // Recomputed units without a backward node of their own still rerun.
  for (size_t unit = 0; unit < recompute.size(); ++unit) {
    if (!recomputed_unit[unit]) ops.insert(ops.end(), recompute[unit].begin(), recompute[unit].end());
  }
  return ops;
}

}  // namespace

StepTime estimate_training_step_time(const Scenario& s, const LayerGraph& graph, const ExecutionOrder& order,
                                     const CheckpointPlan& checkpoints, const ParallelSummary& parallel) {
  (void)order;
  const DeviceThroughput& device = s.device.throughput;
  if (!device.known()) {
    return unmodelled(s, s.device.is_cpu ? "the cpu device has no GPU throughput figures"
                                         : "the device has no throughput figures (a profile gives them)");
  }
  StepTime time;
  time.modelled = true;
  time.micro_batches = std::max<int64_t>(1, s.grad_accum_steps);
  time.ranks = s.parallel.enabled() ? std::max<int64_t>(1, s.parallel.world_size) : 1;
  time.unit_forward_seconds.assign(static_cast<size_t>(std::max(0, graph.num_units)), 0.0);
  double flops = 0.0;
  const std::vector<IssuedOp> ops = micro_batch_ops(graph, checkpoints, device, &flops, &time.ops_without_flops);
  // Autograd's AccumulateGrad adds each new gradient into .grad in place (a kernel reading
  // both and writing one) when .grad already holds a tensor: always after zero_grad() that
  // zeroes, from the second micro-batch after set_to_none (the first steals the new tensor).
  double accumulate_host = 0.0, accumulate_device = 0.0;
  for (TensorId id : graph.parameters) {
    const TensorDesc& desc = graph.tensors[id];
    if (!desc.requires_grad) continue;
    accumulate_host += kHostBackwardNodeSeconds + kHostLaunchSeconds;
    accumulate_device += std::max(kKernelFloorSeconds, 3.0 * static_cast<double>(desc.bytes()) /
                                                           (device.hbm_gbps * 1e9 * kHbmFraction));
  }
  // The micro-batches run back to back without a synchronisation, the host running ahead.
  HostDevicePipeline pipeline;
  for (int64_t micro = 0; micro < time.micro_batches; ++micro) {
    if (micro > 0 || !s.loop.zero_grad_set_to_none) {
      time.backward_seconds += pipeline.issue(accumulate_host, accumulate_device);
    }
    for (const IssuedOp& op : ops) {
      const double seconds = pipeline.issue(op.host, op.device);
      if (op.phase == Phase::Forward) {
        time.forward_seconds += seconds;
        if (micro == 0 && op.unit >= 0) time.unit_forward_seconds[static_cast<size_t>(op.unit)] += std::max(op.host, op.device);
      } else if (op.phase == Phase::Recompute) {
        time.recompute_seconds += seconds;
      } else {
        time.backward_seconds += seconds;
      }
    }
  }
  time.model_flops = static_cast<double>(time.micro_batches) * flops;

  std::vector<uint64_t> trainable_numels;
  uint64_t parameters = 0, trainable = 0;
  for (TensorId id : graph.parameters) {
    const TensorDesc& desc = graph.tensors[id];
    parameters += desc.numel;
    if (desc.requires_grad) {
      trainable += desc.numel;
      trainable_numels.push_back(desc.numel);
    }
  }
  const auto ranks = static_cast<uint64_t>(time.ranks);
  const bool sharded = shards_optimizer(s.parallel);
  const uint64_t stepped = sharded ? (trainable + ranks - 1) / ranks : trainable;
  // A sharded optimizer steps its rank's flat partition: one tensor.
  if (sharded) trainable_numels.assign(trainable > 0 ? 1 : 0, stepped);
  if (optimizer_offloaded(s.parallel)) {
    time.offload_seconds = parallel.offload.transfer_seconds +
                           kHostAdamBytesPerElement * static_cast<double>(stepped) / (kHostOptimizerGbps * 1e9);
  } else {
    time.offload_seconds = parallel.offload.transfer_seconds;  // parameter offload alone
    const OptimizerStepTime step = optimizer_step_time(s, trainable_numels);
    time.optimizer_seconds = pipeline.issue(step.host_seconds, step.device_seconds);
  }
  pipeline.synchronize();  // the step's end (the loss's .item(), GradScaler's inf check)
  CommunicationTime communication = communication_time(s, parameters, trainable);
  time.communication_seconds = communication.seconds;
  time.communication_link = communication.link;
  const double compute = time.forward_seconds + time.backward_seconds + time.recompute_seconds;
  time.communication_exposed_seconds =
      std::max(0.0, communication.overlappable - compute) + (communication.seconds - communication.overlappable);
  time.step_seconds = compute + time.optimizer_seconds + time.communication_exposed_seconds + time.offload_seconds;
  time.samples_per_step = static_cast<double>(s.batch_size) * static_cast<double>(time.micro_batches);
  if (counts_tokens(s)) time.tokens_per_step = time.samples_per_step * static_cast<double>(std::max<int64_t>(1, s.seq_len));
  const double peak = mfu_peak_tflops(s);
  if (time.step_seconds > 0.0 && peak > 0.0) time.model_flops_utilization = time.model_flops / (time.step_seconds * peak * 1e12);
  return time;
}

StepTime estimate_forward_time(const Scenario& s, const LayerGraph& graph) {
  const DeviceThroughput& device = s.device.throughput;
  if (!device.known()) return unmodelled(s, "the device has no throughput figures");
  StepTime time;
  time.modelled = true;
  double flops = 0.0;
  HostDevicePipeline pipeline;
  for (const OpNode& op : graph.ops) {
    OpCost cost = forward_cost(graph, op);
    time.forward_seconds += pipeline.issue(forward_host_seconds(op, cost), kernel_seconds(cost, op.kind, device));
    flops += cost.flops;
    if (cost.matmul_class && !cost.flops_known) ++time.ops_without_flops;
  }
  time.model_flops = flops;
  time.step_seconds = time.forward_seconds;
  time.samples_per_step = static_cast<double>(s.batch_size);
  if (counts_tokens(s)) time.tokens_per_step = time.samples_per_step * static_cast<double>(std::max<int64_t>(1, s.seq_len));
  const double peak = mfu_peak_tflops(s);
  if (time.step_seconds > 0.0 && peak > 0.0) time.model_flops_utilization = flops / (time.step_seconds * peak * 1e12);
  return time;
}

}  // namespace oomcast::planner
