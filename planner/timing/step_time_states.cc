// The model-state side of the step-time model: the optimizer step (bytes-bound: every
// trainable element's parameter, gradient and states are read and written) and the
// collectives of the data-parallel engines, each as bytes over the link with the ring
// algorithm's factor: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n of the
// full tensor per rank.
#include <algorithm>
#include <cmath>

#include "planner/timing/op_cost.h"
#include "planner/parallel/model_states.h"
#include "planner/precision.h"
#include "planner/timing/step_time.h"
#include "planner/timing/step_time_host.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::CheckpointMode;
using scenario::DeviceThroughput;
using scenario::Fsdp2Config;
using scenario::FsdpConfig;
using scenario::FsdpSharding;
using scenario::OptimizerConfig;
using scenario::OptimizerImpl;
using scenario::OptimizerType;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Scenario;
using scenario::ZeroConfig;
using scenario::float_dtype_bytes;

namespace {

// Passes over the tensors relative to one fused kernel: PyTorch's foreach AdamW runs ~21
// tensor reads and writes per element (mul_, lerp_, mul_, addcmul_, sqrt, div_, add_,
// addcdiv_) against the fused kernel's 7 (read p, g, m, v; write p, m, v), so 3×; the
// single-tensor loop runs the same ops tensor by tensor.
constexpr double kUnfusedAdamPasses = 3.0;

// What one optimizer step launches, per parameter tensor for the loops that go tensor by
// tensor, per step for foreach and fused (their launches cover chunks of tensors).
struct OptimizerLaunches {
  double python_ops_per_tensor = 0.0;  // Python-level tensor ops (each at least one launch)
  double kernels_per_tensor = 0.0;
  double foreach_ops = 0.0;            // foreach / fused ops of the whole step
};

// torch.optim's single-tensor Adam(W): param.mul_ (weight decay), exp_avg.mul_().add_(),
// exp_avg_sq.mul_().addcmul_(), denom = (sqrt / bias correction).add_(eps), param.addcdiv_:
// 9 kernels, and the step counter's increment (a CPU tensor) a tenth op; foreach runs the
// same ~10 ops over lists. bitsandbytes' 8-bit Adam calls one kernel per tensor from a Python
// loop (~3 Python ops of bookkeeping, assumed). Hugging Face's Adafactor runs ~16 ops per
// tensor (squared gradient, row and column means and their running averages, the rsqrt
// approximation, the update's RMS and clipping, the parameter update; a count of its code,
// rounded).
OptimizerLaunches optimizer_launches(const OptimizerConfig& optimizer) {
  const bool momentum = optimizer.momentum != 0.0;
  switch (optimizer.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      if (optimizer.impl == OptimizerImpl::SingleTensor) return {10.0, 9.0, 0.0};
      return {0.0, 0.0, optimizer.impl == OptimizerImpl::Fused ? 1.0 : 10.0};
    case OptimizerType::AdamW8bit:
      return {3.0, 1.0, 0.0};
    case OptimizerType::Sgd:
      if (optimizer.impl == OptimizerImpl::SingleTensor) return {momentum ? 3.0 : 1.0, momentum ? 3.0 : 1.0, 0.0};
      return {0.0, 0.0, optimizer.impl == OptimizerImpl::Fused ? 1.0 : (momentum ? 3.0 : 1.0)};
    case OptimizerType::Adafactor:
      return {16.0, 16.0, 0.0};
    case OptimizerType::Muon:
      // lerp_, lerp, bfloat16, norm, clamp, div_, ns_steps x (mm, addmm, addmm), mul_, add_.
      return {8.0 + 3.0 * static_cast<double>(optimizer.ns_steps), 8.0 + 3.0 * static_cast<double>(optimizer.ns_steps), 0.0};
    case OptimizerType::AnyPrecisionAdamW:
      // The single-tensor AdamW's ops plus the compensation's addcdiv_, clone, add_, sub_, add_.
      return {optimizer.kahan_summation ? 15.0 : 10.0, optimizer.kahan_summation ? 14.0 : 9.0, 0.0};
  }
  return {};
}

// A foreach or fused op launches one kernel per chunk of its tensor lists: multi_tensor_apply
// packs at most a few dozen tensors into one launch for four lists (p, g, m, v), taken as 36.
constexpr double kForeachTensorsPerLaunch = 36.0;

double ring_all_reduce(double bytes, double ranks) { return 2.0 * (ranks - 1.0) / ranks * bytes; }
double ring_gather(double bytes, double ranks) { return (ranks - 1.0) / ranks * bytes; }

}  // namespace

OptimizerStepTime optimizer_step_time(const Scenario& s, const std::vector<uint64_t>& stepped_tensors) {
  OptimizerStepTime time;
  const DeviceThroughput& device = s.device.throughput;
  if (!device.known() || stepped_tensors.empty()) return time;
  const PrecisionRules rules = job_precision_rules(s);
  const double gradient = static_cast<double>(dtype_bytes(rules.parameter_dtype));
  const double master = static_cast<double>(dtype_bytes(rules.fp32_master_weights ? DType::Float32 : rules.parameter_dtype));
  double per_element = 0.0;
  double passes = s.optimizer.impl == OptimizerImpl::Fused ? 1.0 : kUnfusedAdamPasses;
  switch (s.optimizer.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      per_element = (master + gradient + 2 * master) + (master + 2 * master);
      break;
    case OptimizerType::AdamW8bit:
      per_element = (master + gradient + 2.0) + (master + 2.0);  // one bitsandbytes kernel
      passes = 1.0;
      break;
    case OptimizerType::Sgd: {
      const bool momentum = s.optimizer.momentum != 0.0;
      per_element = momentum ? (master + gradient + master) + 2 * master : master + gradient + master;
      passes = s.optimizer.impl == OptimizerImpl::Fused ? 1.0 : (momentum ? 2.0 : 1.0);
      break;
    }
    case OptimizerType::Adafactor:
      // Squared gradient, row and column means, the update and its RMS, the parameter update:
      // about four passes over parameter and gradient.
      per_element = master + gradient + master;
      passes = 4.0;
      break;
    case OptimizerType::Muon:
      // Momentum and Nesterov lerps, the bf16 copy and the update; the Newton-Schulz matmuls'
      // FLOPs are not counted here (an underestimate for large matrices).
      per_element = (master + gradient + master) + (master + gradient + 2.0);
      passes = 2.0;
      break;
    case OptimizerType::AnyPrecisionAdamW:
      per_element = (master + gradient + 2 * master) + (master + 2 * master);
      if (s.optimizer.kahan_summation) per_element += 4 * master;
      break;
  }
  double bytes_per_element = passes * per_element;
  if (rules.fp32_master_weights) bytes_per_element += master + gradient;  // copy back to 16-bit
  const OptimizerLaunches launches = optimizer_launches(s.optimizer);
  const double hbm = device.hbm_gbps * 1e9 * kHbmFraction;
  const auto tensors = static_cast<double>(stepped_tensors.size());
  double elements = 0.0;
  for (uint64_t numel : stepped_tensors) {
    const double tensor_seconds = bytes_per_element * static_cast<double>(numel) / hbm;
    elements += static_cast<double>(numel);
    // A loop over tensors: a small tensor's kernels are bound by the launch floor.
    time.device_seconds += launches.kernels_per_tensor > 0.0
                               ? std::max(tensor_seconds, launches.kernels_per_tensor * kKernelFloorSeconds)
                               : tensor_seconds;
  }
  const double chunks = std::ceil(tensors / kForeachTensorsPerLaunch);
  time.device_seconds = std::max(time.device_seconds, launches.foreach_ops * chunks * kKernelFloorSeconds);
  time.host_seconds = python_ops_host_seconds(launches.python_ops_per_tensor * tensors, launches.kernels_per_tensor * tensors) +
                      python_ops_host_seconds(launches.foreach_ops, launches.foreach_ops * chunks);
  const double gradient_bytes = gradient * elements;
  if (rules.grad_scaler) {
    // GradScaler.unscale_: one foreach kernel reads and writes every gradient and checks for
    // infs; step() reads the flag back (a synchronisation) and update() rescales.
    time.device_seconds += std::max(2.0 * gradient_bytes / hbm, chunks * kKernelFloorSeconds);
    time.host_seconds += python_ops_host_seconds(3.0, chunks + 2.0);
  }
  if (!s.loop.zero_grad_set_to_none) {
    // zero_grad() that zeroes: Module.zero_grad's Python loop fills every gradient.
    time.device_seconds += std::max(gradient_bytes / hbm, tensors * kKernelFloorSeconds);
    time.host_seconds += python_ops_host_seconds(tensors, tensors);
  }
  return time;
}

CommunicationTime communication_time(const Scenario& s, uint64_t parameters, uint64_t trainable) {
  CommunicationTime time;
  const ParallelConfig& parallel = s.parallel;
  const DeviceThroughput& device = s.device.throughput;
  if (!parallel.enabled() || parallel.world_size <= 1 || !device.known()) return time;
  const auto ranks = static_cast<double>(parallel.world_size);
  const bool one_node = parallel.world_size <= std::max<int64_t>(1, parallel.gpus_per_node);
  const double link_gbps = one_node ? device.interconnect_gbps : device.internode_gbps;
  time.link = one_node ? "GPU-to-GPU links in the node" : "the inter-node network";
  if (link_gbps <= 0.0) return time;
  const double micro = static_cast<double>(std::max<int64_t>(1, s.grad_accum_steps));
  const PrecisionRules rules = job_precision_rules(s);
  double param_bytes = static_cast<double>(dtype_bytes(rules.parameter_dtype)) * static_cast<double>(parameters);
  double grad_bytes = static_cast<double>(dtype_bytes(rules.parameter_dtype)) * static_cast<double>(trainable);
  double overlappable = 0.0;
  double serial = 0.0;
  if (parallel.engine == ParallelEngine::Ddp) {
    overlappable = ring_all_reduce(grad_bytes, ranks);  // once per step (no_sync while accumulating), in buckets
  } else if (parallel.engine == ParallelEngine::Fsdp) {
    const FsdpConfig& fsdp = parallel.fsdp;
    if (fsdp.mixed_precision) {
      param_bytes = static_cast<double>(float_dtype_bytes(fsdp.param_dtype)) * static_cast<double>(parameters);
      grad_bytes = static_cast<double>(float_dtype_bytes(fsdp.reduce_dtype)) * static_cast<double>(trainable);
    }
    if (fsdp.sharding_strategy == FsdpSharding::NoShard) {
      overlappable = micro * ring_all_reduce(grad_bytes, ranks);
    } else {
      const double gathers = fsdp.sharding_strategy == FsdpSharding::FullShard ? 2.0 : 1.0;  // forward, backward
      overlappable = micro * (gathers * ring_gather(param_bytes, ranks) + ring_gather(grad_bytes, ranks));
    }
  } else if (parallel.engine == ParallelEngine::Fsdp2) {
    // fully_shard: every group's parameters are all-gathered for forward and, when resharded
    // after forward, again for backward; its gradients are reduce-scattered every micro-batch
    // (no no_sync by default), overlapped with compute by the copy-in and reduce-scatter streams.
    const Fsdp2Config& fsdp2 = parallel.fsdp2;
    if (fsdp2.mixed_precision) {
      param_bytes = static_cast<double>(float_dtype_bytes(fsdp2.param_dtype)) * static_cast<double>(parameters);
      grad_bytes = static_cast<double>(float_dtype_bytes(fsdp2.reduce_dtype)) * static_cast<double>(trainable);
    }
    const double gathers = fsdp2.reshard_after_forward ? 2.0 : 1.0;
    overlappable = micro * (gathers * ring_gather(param_bytes, ranks) + ring_gather(grad_bytes, ranks));
  } else if (parallel.engine == ParallelEngine::DeepSpeed) {
    const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
    double reduce = 0.0;
    if (zero.stage <= 1) {
      reduce = ring_all_reduce(grad_bytes, ranks);  // at the accumulation boundary
    } else {
      reduce = micro * ring_gather(grad_bytes, ranks);  // reduce-scatter every micro-batch
    }
    (zero.overlap_comm ? overlappable : serial) += reduce;
    if (zero.stage == 3) {
      const double gathers = s.checkpointing.mode == CheckpointMode::None ? 2.0 : 3.0;  // + the recompute
      overlappable += micro * gathers * ring_gather(param_bytes, ranks);
    } else if (zero.stage >= 1) {
      serial += ring_gather(param_bytes, ranks);  // the updated 16-bit partitions, after the step
    }
  }
  time.bytes = overlappable + serial;
  const double rate = link_gbps * 1e9 * kCollectivePeakFraction;
  time.seconds = time.bytes / rate;
  time.overlappable = overlappable / rate;
  return time;
}

}  // namespace oomcast::planner
