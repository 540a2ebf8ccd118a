// Generation time: the prefill and decode graphs op by op (op_cost.h), plus the KV-cache
// traffic the graphs do not carry (a decode graph's attention op sees one new position; the
// cache it reads is the generate loop's). Per decode step at cache length L (prompt + t):
//   attention reads K and V of every layer: 2·layers·L·(bytes per position, the repeated
//     copy's under grouped-query attention), L = max_cache_len for a static cache;
//   a dynamic cache's torch.cat reads L-1 positions and writes L, for K and V of every layer;
//   repeat_kv reads L positions and writes them to every head; beam search's index_select
//   reads and writes the whole cache.
// The sum over t = 1..new_tokens-1 is closed-form (arithmetic in L).
#include "planner/timing/generation_time.h"

#include <algorithm>

#include "planner/timing/op_cost.h"
#include "planner/timing/step_time_host.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::DeviceThroughput;
using scenario::OpKind;
using scenario::Scenario;

namespace {

struct GraphTime {
  double seconds = 0.0;
  double flops = 0.0;
  uint64_t ops_without_flops = 0;
};

// One forward of the graph. Eagerly each op pays the launch floor and its host dispatch,
// which the GPU overlaps (step_time_host.h); a replayed CUDA graph launches its kernels
// without the CPU, so the roofline alone times them.
GraphTime forward_seconds(const LayerGraph& graph, const DeviceThroughput& device, bool replayed) {
  GraphTime time;
  HostDevicePipeline pipeline;
  for (const OpNode& op : graph.ops) {
    OpCost cost = forward_cost(graph, op);
    const double device_seconds = kernel_seconds(cost, op.kind, device, replayed ? 0.0 : kKernelFloorSeconds);
    time.seconds += pipeline.issue(replayed ? 0.0 : forward_host_seconds(op, cost), device_seconds);
    time.flops += cost.flops;
    if (cost.matmul_class && !cost.flops_known) ++time.ops_without_flops;
  }
  return time;
}

}  // namespace

StepTime estimate_generation_time(const Scenario& s, const LayerGraph& prefill, const LayerGraph& decode,
                                  const GenerationShape& shape) {
  const DeviceThroughput& device = s.device.throughput;
  StepTime time;
  if (!device.known()) {
    time.not_modelled = s.device.is_cpu ? "the cpu device has no GPU throughput figures"
                                        : "the device has no throughput figures (a profile gives them)";
    return time;
  }
  time.modelled = true;
  time.generation = true;
  GraphTime first = forward_seconds(prefill, device, false);
  GraphTime step = forward_seconds(decode, device, shape.decode_replayed);
  const auto steps = static_cast<double>(std::max<int64_t>(0, shape.new_tokens - 1));
  const double bandwidth = device.hbm_gbps * 1e9 * kHbmFraction;
  const double layers = static_cast<double>(shape.layers);
  const double per_position = static_cast<double>(shape.cache_bytes_per_token);
  const double repeated = static_cast<double>(shape.repeated_bytes_per_token);
  // Σ L over the decode steps, L = prompt + t for t = 1..steps.
  const double prompt = static_cast<double>(shape.prompt);
  const double lengths = steps * prompt + steps * (steps + 1.0) / 2.0;
  const double read_lengths = shape.dynamic_cache ? lengths : steps * static_cast<double>(shape.max_cache_len);
  // Bytes moved per position summed over steps, for K and V of every layer.
  double bytes = 2.0 * layers * read_lengths * (repeated > 0.0 ? repeated : per_position);  // attention
  double kernels = 0.0;                                                                  // per step
  if (shape.dynamic_cache) {
    bytes += 2.0 * layers * (2.0 * lengths - steps) * per_position;  // torch.cat: read L-1, write L
    kernels += 2.0 * layers;
  }
  if (repeated > 0.0) {
    bytes += 2.0 * layers * read_lengths * (per_position + repeated);  // repeat_kv: read, write every head
    kernels += 2.0 * layers;
  }
  if (shape.beam_reorder) {
    bytes += 2.0 * layers * 2.0 * read_lengths * per_position;  // index_select: read and write
    kernels += 2.0 * layers;
  }
  const double floor = shape.decode_replayed ? 0.0 : kKernelFloorSeconds;
  // The cache's ops are Python-level calls of the generate loop (torch.cat, repeat_kv,
  // index_select) unless a graph replays them.
  const double cache_host = shape.decode_replayed ? 0.0 : python_ops_host_seconds(steps * kernels, steps * kernels);
  const double cache_seconds = std::max({bytes / bandwidth, steps * kernels * floor, cache_host});

  time.prefill_seconds = first.seconds;
  time.decode_seconds = steps * step.seconds + cache_seconds;
  time.decode_steps = static_cast<int64_t>(steps);
  time.forward_seconds = time.prefill_seconds + time.decode_seconds;
  time.step_seconds = time.forward_seconds;
  time.model_flops = first.flops + steps * step.flops;
  time.ops_without_flops = first.ops_without_flops + step.ops_without_flops;
  time.samples_per_step = static_cast<double>(s.batch_size);
  time.sequences = shape.sequences;
  // Every step, the prefill included, makes one token per sequence.
  time.tokens_per_step = static_cast<double>(shape.sequences) * static_cast<double>(shape.new_tokens);
  const PrecisionRules rules = job_precision_rules(s);
  const double peak = matmul_peak_tflops(rules.autocast ? rules.low_dtype : rules.parameter_dtype, OpKind::Linear, device);
  if (time.step_seconds > 0.0 && peak > 0.0) time.model_flops_utilization = time.model_flops / (time.step_seconds * peak * 1e12);
  return time;
}

}  // namespace oomcast::planner
