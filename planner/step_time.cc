// The step-time walk: every op's forward and backward as a roofline (op_cost.h), the
// checkpointed ops' forward again for the recompute, per micro-batch; then the optimizer
// step, the collectives (overlapped with compute where the engine overlaps them) and the
// offload traffic, which is taken as not overlapped (an upper bound: DeepSpeed overlaps part
// of the gradient copies with backward).
#include "planner/step_time.h"

#include <algorithm>

#include "planner/op_cost.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

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
  return parallel.engine == ParallelEngine::Fsdp && parallel.fsdp.cpu_offload;
}

bool shards_optimizer(const ParallelConfig& parallel) {
  if (parallel.engine == ParallelEngine::DeepSpeed) return parallel.deepspeed.zero_optimization.stage >= 1;
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
  double forward = 0.0, backward = 0.0, recompute = 0.0, flops = 0.0;
  for (size_t index = 0; index < graph.ops.size(); ++index) {
    const OpNode& op = graph.ops[index];
    OpCost forward_op = forward_cost(graph, op);
    OpCost backward_op = backward_cost(graph, op);
    double forward_seconds = kernel_seconds(forward_op, op.kind, device);
    forward += forward_seconds;
    backward += kernel_seconds(backward_op, op.kind, device);
    flops += forward_op.flops + backward_op.flops;
    if (forward_op.matmul_class && !forward_op.flops_known) ++time.ops_without_flops;
    if (op.unit >= 0) time.unit_forward_seconds[static_cast<size_t>(op.unit)] += forward_seconds;
    if (index < checkpoints.recomputed.size() && checkpoints.recomputed[index]) recompute += forward_seconds;
  }
  const auto micro = static_cast<double>(time.micro_batches);
  time.forward_seconds = micro * forward;
  time.backward_seconds = micro * backward;
  time.recompute_seconds = micro * recompute;
  time.model_flops = micro * flops;

  uint64_t parameters = 0, trainable = 0, trainable_tensors = 0;
  for (TensorId id : graph.parameters) {
    const TensorDesc& desc = graph.tensors[id];
    parameters += desc.numel;
    if (desc.requires_grad) {
      trainable += desc.numel;
      ++trainable_tensors;
    }
  }
  const auto ranks = static_cast<uint64_t>(time.ranks);
  const uint64_t stepped = shards_optimizer(s.parallel) ? (trainable + ranks - 1) / ranks : trainable;
  if (optimizer_offloaded(s.parallel)) {
    time.offload_seconds = parallel.offload.transfer_seconds +
                           kHostAdamBytesPerElement * static_cast<double>(stepped) / (kHostOptimizerGbps * 1e9);
  } else {
    time.offload_seconds = parallel.offload.transfer_seconds;  // parameter offload alone
    time.optimizer_seconds = optimizer_step_seconds(s, stepped, trainable_tensors);
  }
  CommunicationTime communication = communication_time(s, parameters, trainable);
  time.communication_seconds = communication.seconds;
  time.communication_link = communication.link;
  const double compute = time.forward_seconds + time.backward_seconds + time.recompute_seconds;
  time.communication_exposed_seconds =
      std::max(0.0, communication.overlappable - compute) + (communication.seconds - communication.overlappable);
  time.step_seconds = compute + time.optimizer_seconds + time.communication_exposed_seconds + time.offload_seconds;
  time.samples_per_step = static_cast<double>(s.batch_size) * micro;
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
  for (const OpNode& op : graph.ops) {
    OpCost cost = forward_cost(graph, op);
    time.forward_seconds += kernel_seconds(cost, op.kind, device);
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
