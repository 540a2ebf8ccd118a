// The engine-independent part of a rank: parameter lookups, the factory, and the summary the
// report prints (model states, host RAM, NCCL buffers; the training job adds the offload cost).
#include "planner/parallel/parallel_rank.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/parallel/fsdp2_shards.h"
#include "planner/parallel/fsdp_rank_shards.h"

namespace oomcast::planner {

using scenario::Fsdp2Config;
using scenario::FsdpAutoWrap;
using scenario::FsdpConfig;
using scenario::FsdpSharding;
using scenario::OffloadDevice;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Scenario;
using scenario::ZeroConfig;
using scenario::ZeroOffloadConfig;
using scenario::float_dtype_bytes;
using scenario::fsdp_sharding_name;

ParallelRank::ParallelRank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, ModelState* model)
    : scenario_(scenario), graph_(graph), writer_(writer), model_(model), uses_(parameter_uses(graph)) {}

uint64_t ParallelRank::param_numel(int32_t parameter) const {
  return graph_.tensors[graph_.parameters[static_cast<size_t>(parameter)]].numel;
}

DType ParallelRank::param_dtype(int32_t parameter) const {
  return graph_.tensors[graph_.parameters[static_cast<size_t>(parameter)]].dtype;
}

const std::string& ParallelRank::param_name(int32_t parameter) const {
  return graph_.names[graph_.tensors[graph_.parameters[static_cast<size_t>(parameter)]].name];
}

void ParallelRank::drop_grad(int32_t parameter) {
  int64_t& slot = model_->grad_slot[static_cast<size_t>(parameter)];
  if (slot >= 0) writer_->free(static_cast<uint32_t>(slot));
  slot = -1;
}

std::unique_ptr<ParallelRank> make_parallel_rank(const Scenario& scenario, const LayerGraph& graph,
                                                 ScheduleWriter* writer, ModelState* model) {
  switch (scenario.parallel.engine) {
    case ParallelEngine::None: return nullptr;
    case ParallelEngine::Ddp: return make_ddp_rank(scenario, graph, writer, model);
    case ParallelEngine::Fsdp: return make_fsdp_rank(scenario, graph, writer, model);
    case ParallelEngine::DeepSpeed: return make_deepspeed_rank(scenario, graph, writer, model);
    case ParallelEngine::Fsdp2: return make_fsdp2_rank(scenario, graph, writer, model);
  }
  return nullptr;
}

namespace {

const char* device_text(const ZeroOffloadConfig& offload) {
  if (offload.device == OffloadDevice::None) return "none";
  return offload.pin_memory ? "cpu (pinned)" : "cpu (pageable)";
}

std::string describe(const ParallelConfig& parallel) {
  switch (parallel.engine) {
    case ParallelEngine::None: return "none";
    case ParallelEngine::Ddp:
      return fmt::format("DDP, {} ranks, bucket_cap_mb {}, gradient_as_bucket_view {}", parallel.world_size,
                         parallel.ddp.bucket_cap_mb, parallel.ddp.gradient_as_bucket_view);
    case ParallelEngine::Fsdp: {
      const FsdpConfig& fsdp = parallel.fsdp;
      std::string text = fmt::format("FSDP {}, {} ranks, wrap {}", fsdp_sharding_name(fsdp.sharding_strategy),
                                     parallel.world_size, fsdp.auto_wrap == FsdpAutoWrap::Block ? "block" : "none");
      if (fsdp.mixed_precision) {
        text += fmt::format(", param_dtype {}, reduce_dtype {}", float_dtype_bytes(fsdp.param_dtype) == 4 ? "fp32" : "16-bit",
                            float_dtype_bytes(fsdp.reduce_dtype) == 4 ? "fp32" : "16-bit");
      }
      if (fsdp.cpu_offload) text += ", cpu_offload";
      return text;
    }
    case ParallelEngine::Fsdp2: {
      const Fsdp2Config& fsdp2 = parallel.fsdp2;
      std::string text = fmt::format("FSDP2 fully_shard per block, {} ranks, reshard_after_forward {}", parallel.world_size,
                                     fsdp2.reshard_after_forward);
      if (fsdp2.mixed_precision) {
        text += fmt::format(", param_dtype {}, reduce_dtype {}", float_dtype_bytes(fsdp2.param_dtype) == 4 ? "fp32" : "16-bit",
                            float_dtype_bytes(fsdp2.reduce_dtype) == 4 ? "fp32" : "16-bit");
      }
      if (fsdp2.cpu_offload) text += ", CPUOffloadPolicy";
      return text;
    }
    case ParallelEngine::DeepSpeed: {
      const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
      std::string text = fmt::format("DeepSpeed ZeRO-{}, {} ranks", zero.stage, parallel.world_size);
      if (zero.offload_optimizer.device != OffloadDevice::None) {
        text += fmt::format(", offload_optimizer {}", device_text(zero.offload_optimizer));
      }
      if (zero.offload_param.device != OffloadDevice::None) {
        text += fmt::format(", offload_param {}", device_text(zero.offload_param));
      }
      if (!parallel.deepspeed.config_file.empty()) text += " (" + parallel.deepspeed.config_file + ")";
      return text;
    }
  }
  return "?";
}

bool host_pinned(const ParallelConfig& parallel) {
  if (parallel.engine == ParallelEngine::Fsdp) return parallel.fsdp.cpu_offload;  // FSDP pins its CPU shards
  if (parallel.engine == ParallelEngine::Fsdp2) return parallel.fsdp2.cpu_offload;  // CPUOffloadPolicy(pin_memory=True)
  if (parallel.engine != ParallelEngine::DeepSpeed) return false;
  const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
  return (zero.offload_optimizer.device == OffloadDevice::Cpu && zero.offload_optimizer.pin_memory) ||
         (zero.offload_param.device == OffloadDevice::Cpu && zero.offload_param.pin_memory);
}

}  // namespace

ParallelSummary summarize_parallel(const Scenario& scenario, const LayerGraph& graph) {
  ParallelSummary summary;
  const ParallelConfig& parallel = scenario.parallel;
  summary.warnings = scenario.model.warnings;
  if (!parallel.enabled()) return summary;
  summary.enabled = true;
  summary.description = describe(parallel);
  summary.world_size = parallel.world_size;
  summary.gpus_per_node = parallel.gpus_per_node;
  ParameterUses uses = parameter_uses(graph);
  summary.sizes.parameters = graph.parameter_count();
  summary.sizes.largest_layer_parameters = uses.largest_module_numel;
  const UnitGroups units = unit_groups(
      graph, uses, parallel.engine == ParallelEngine::Fsdp2 || parallel.fsdp.auto_wrap == FsdpAutoWrap::Block);
  summary.sizes.largest_unit_parameters = units.largest_numel();
  for (TensorId parameter : graph.parameters) {
    const TensorDesc& desc = graph.tensors[parameter];
    summary.sizes.parameter_bytes += desc.bytes();
    if (!desc.requires_grad) continue;
    summary.sizes.trainable_parameters += desc.numel;
    summary.sizes.trainable_bytes += desc.bytes();
  }
  if (parallel.engine == ParallelEngine::Fsdp) {
    const FsdpRankShards shards =
        fsdp_rank_shards(graph, units, static_cast<uint64_t>(std::max<int64_t>(1, parallel.world_size)),
                         parallel.fsdp.sharding_strategy != FsdpSharding::NoShard);
    summary.sizes.gradient_unit_parameters = shards.gradient_unit_elements;
    summary.sizes.rank_trainable_shard = shards.trainable_elements;
  }
  if (parallel.engine == ParallelEngine::Fsdp2) {
    const Fsdp2Shards shards = fsdp2_shards(graph, units, static_cast<uint64_t>(std::max<int64_t>(1, parallel.world_size)));
    summary.sizes.rank_parameter_shard = shards.shard_elements;
    summary.sizes.rank_trainable_shard = shards.trainable_shard_elements;
  }
  summary.model_states = model_state_bytes(parallel, scenario.precision, scenario.optimizer, summary.sizes);
  summary.host_bytes = summary.model_states.host_per_rank;
  summary.host_pinned = host_pinned(parallel) && summary.host_bytes > 0;
  summary.host_bytes_per_node = summary.model_states.host_per_node(parallel.gpus_per_node);
  summary.host_load_peak_per_node = summary.model_states.host_load_peak_per_node;
  summary.nccl_buffer_bytes = parallel.nccl_buffer_bytes;
  summary.warnings.insert(summary.warnings.end(), parallel.warnings.begin(), parallel.warnings.end());
  return summary;
}

}  // namespace oomcast::planner
