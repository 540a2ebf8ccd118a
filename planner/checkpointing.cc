// Checkpoint policies: full (every block), every n-th block, selective (PyTorch's
// selective-checkpoint API: ops of the listed kinds are recomputed, the others' outputs kept),
// and auto, resolved per block (each block full, selective or off, as the advisor chose).
#include "planner/checkpointing.h"
#include "planner/op_reads.h"

#include <algorithm>
#include <climits>

#include "base/edit_distance.h"
#include "base/input_error.h"

namespace oomcast::planner {

using scenario::CheckpointConfig;
using scenario::CheckpointMode;
using scenario::OpKind;
using scenario::op_kind_names;
using scenario::parse_op_kind;

bool CheckpointPlan::any() const {
  return std::any_of(unit_checkpointed.begin(), unit_checkpointed.end(), [](uint8_t on) { return on != 0; });
}

CheckpointPlan plan_checkpointing(const LayerGraph& graph, const ExecutionOrder& order, const CheckpointConfig& config) {
  const auto num_units = static_cast<size_t>(graph.num_units);
  CheckpointPlan plan;
  plan.unit_checkpointed.assign(num_units, 0);
  plan.unit_first_position.assign(num_units, INT32_MAX);
  plan.unit_last_position.assign(num_units, -1);
  plan.unit_recompute_stop.assign(num_units, -1);
  plan.unit_kept.resize(num_units);
  plan.saved_dropped.resize(graph.ops.size());
  plan.recomputed.assign(graph.ops.size(), 0);
  plan.recompute_last_use.assign(graph.tensors.size(), -1);
  for (size_t op = 0; op < graph.ops.size(); ++op) plan.saved_dropped[op].assign(graph.ops[op].saved.size(), 0);
  using ModelCheckpoint = LayerGraph::ModelCheckpoint;
  auto model_checkpoint = [&](size_t unit) {
    return unit < graph.unit_model_checkpoint.size() ? graph.unit_model_checkpoint[unit] : ModelCheckpoint::None;
  };
  bool any_model_checkpoint = false;
  for (size_t unit = 0; unit < num_units; ++unit) any_model_checkpoint |= model_checkpoint(unit) != ModelCheckpoint::None;
  if (config.mode == CheckpointMode::None && !any_model_checkpoint) return plan;

  auto kinds_of = [](const std::vector<std::string>& names) {
    std::vector<uint8_t> kinds(64, 0);
    for (const std::string& name : names) {
      OpKind kind;
      if (!parse_op_kind(name, &kind)) {
        throw InputError(SourceLocation{}, "checkpointing.recompute_ops",
                         "unknown op kind '" + name + "'" + did_you_mean(name, op_kind_names()));
      }
      kinds[static_cast<size_t>(kind)] = 1;
    }
    return kinds;
  };
  // Per unit: selective (only the listed kinds recomputed) or whole, and which kinds.
  std::vector<uint8_t> unit_selective(num_units, config.mode == CheckpointMode::Selective ? 1 : 0);
  std::vector<std::vector<uint8_t>> unit_kinds(num_units, std::vector<uint8_t>(64, 0));
  if (config.mode == CheckpointMode::Selective) {
    if (config.recompute_ops.empty() && config.save_ops.empty()) {
      throw InputError(SourceLocation{}, "checkpointing.recompute_ops", "selective checkpointing needs recompute_ops");
    }
    std::vector<uint8_t> kinds = kinds_of(config.recompute_ops);
    if (!config.save_ops.empty()) {
      // A save list: every other op is recomputed (CheckpointPolicy.PREFER_RECOMPUTE).
      kinds = kinds_of(config.save_ops);
      for (uint8_t& kind : kinds) kind = kind ? 0 : 1;
    }
    unit_kinds.assign(num_units, kinds);
  }
  for (size_t unit = 0; unit < num_units; ++unit) {
    bool on = config.mode != CheckpointMode::EveryN || config.every_n <= 1 ||
              unit % static_cast<size_t>(config.every_n) == 0;
    if (config.mode == CheckpointMode::Auto) {
      on = unit < config.units.size() && config.units[unit].on;
      if (on && !config.units[unit].recompute_ops.empty()) {
        unit_selective[unit] = 1;
        unit_kinds[unit] = kinds_of(config.units[unit].recompute_ops);
      }
    }
    if (config.mode == CheckpointMode::None) on = false;
    if (model_checkpoint(unit) != ModelCheckpoint::None) {  // the model's own checkpoint call: whole, always
      on = true;
      unit_selective[unit] = 0;
    }
    plan.unit_checkpointed[unit] = on ? 1 : 0;
  }
  plan.unit_reentrant.assign(num_units, 0);
  for (size_t unit = 0; unit < num_units; ++unit) {
    const bool reentrant = model_checkpoint(unit) != ModelCheckpoint::None
                               ? model_checkpoint(unit) == ModelCheckpoint::Reentrant
                               : config.reentrant;
    plan.unit_reentrant[unit] = plan.unit_checkpointed[unit] && reentrant && !unit_selective[unit] ? 1 : 0;
  }
  auto recompute_kind = [&](size_t unit, OpKind kind) { return unit_kinds[unit][static_cast<size_t>(kind)] != 0; };
  // Per op of a selective unit: recomputed (else its outputs are saved). torchtitan's op policy
  // saves only the odd-numbered aten.mm of each checkpoint call (its mm_count meta), so with
  // every_other_linear the 2nd, 4th, ... linear of a block is recomputed.
  std::vector<uint8_t> op_recompute(graph.ops.size(), 0);
  std::vector<int64_t> linears_seen(num_units, 0);
  for (uint32_t op_index : order.order) {
    const OpNode& op = graph.ops[op_index];
    if (op.unit < 0) continue;
    auto u = static_cast<size_t>(op.unit);
    op_recompute[op_index] = recompute_kind(u, op.kind) ? 1 : 0;
    if (config.every_other_linear && unit_selective[u] && op.kind == OpKind::Linear && ++linears_seen[u] % 2 == 0) {
      op_recompute[op_index] = 1;
    }
  }

  std::vector<int32_t> producer_unit(graph.tensors.size(), -1);
  std::vector<uint32_t> producer_op(graph.tensors.size(), 0);
  std::vector<uint8_t> has_producer(graph.tensors.size(), 0);
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    for (TensorId out : graph.ops[op].outputs) {
      producer_unit[out] = graph.ops[op].unit;
      producer_op[out] = static_cast<uint32_t>(op);
      has_producer[out] = 1;
    }
  }
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    int32_t unit = graph.ops[op].unit;
    if (unit < 0) continue;
    auto u = static_cast<size_t>(unit);
    plan.unit_first_position[u] = std::min(plan.unit_first_position[u], order.position[op]);
    plan.unit_last_position[u] = std::max(plan.unit_last_position[u], order.position[op]);
  }

  // Which saved tensors each checkpointed op drops, and which ops backward re-runs.
  for (uint32_t op_index : order.order) {
    const OpNode& op = graph.ops[op_index];
    if (op.unit < 0 || !plan.unit_checkpointed[static_cast<size_t>(op.unit)]) continue;
    auto u = static_cast<size_t>(op.unit);
    bool selective = unit_selective[u] != 0;
    bool recompute_this = !selective || op_recompute[op_index];
    for (size_t i = 0; i < op.saved.size(); ++i) {
      TensorId tensor = graph.tensors[op.saved[i]].storage;
      bool inside = has_producer[tensor] && producer_unit[tensor] == op.unit;
      if (!inside) continue;  // block inputs and parameters stay (the checkpoint keeps its inputs)
      bool dropped = !selective || op_recompute[producer_op[tensor]];
      plan.saved_dropped[op_index][i] = dropped ? 1 : 0;
      if (dropped) plan.unit_recompute_stop[u] = std::max(plan.unit_recompute_stop[u], order.position[op_index]);
    }
    if (recompute_this && op.kind != OpKind::ScopeEnd) plan.recomputed[op_index] = 1;
  }
  // CheckpointFunction.backward (reentrant) re-runs the whole block; the non-reentrant frame
  // stops at the last saved tensor (early_stop, torch/utils/checkpoint.py _StopRecomputationError).
  for (size_t unit = 0; unit < num_units; ++unit) {
    if (plan.unit_reentrant[unit] && plan.unit_recompute_stop[unit] >= 0) {
      plan.unit_recompute_stop[unit] = plan.unit_last_position[unit];
    }
  }
  for (uint32_t op_index : order.order) {
    const OpNode& op = graph.ops[op_index];
    if (!plan.recomputed[op_index]) continue;
    auto u = static_cast<size_t>(op.unit);
    int32_t position = order.position[op_index];
    if (position > plan.unit_recompute_stop[u]) {
      plan.recomputed[op_index] = 0;  // non-reentrant checkpoint stops once every saved tensor exists
      continue;
    }
    for_each_read(op, [&](TensorId in) {
      TensorId storage = graph.tensors[in].storage;
      bool inside = has_producer[storage] && producer_unit[storage] == op.unit;
      const TensorRole role = graph.tensors[storage].role;
      bool activation = role == TensorRole::Activation || role == TensorRole::AutocastWeight;
      if (!inside && activation && has_producer[storage]) {
        plan.unit_kept[u].push_back(storage);  // a block input: checkpoint keeps it
      } else if (inside && unit_selective[u] && !op_recompute[producer_op[storage]]) {
        plan.unit_kept[u].push_back(storage);  // SAC caches the outputs of "save" ops
      }
      if (inside) plan.recompute_last_use[in] = std::max(plan.recompute_last_use[in], position);
    });
  }
  // Outputs of recomputed ops used outside the unit (the block output, autocast casts held by
  // the cache) live until the recompute ends.
  for (uint32_t op_index : order.order) {
    const OpNode& op = graph.ops[op_index];
    if (op.unit < 0) continue;
    for_each_read(op, [&](TensorId in) {
      int32_t unit = producer_unit[in];
      if (unit >= 0 && unit != op.unit && has_producer[in]) plan.recompute_last_use[in] = INT32_MAX;
    });
  }
  for (const OpNode& op : graph.ops) {
    if (op.unit >= 0) continue;
    for_each_read(op, [&](TensorId in) {
      if (producer_unit[in] >= 0) plan.recompute_last_use[in] = INT32_MAX;
    });
  }
  for (auto& kept : plan.unit_kept) {
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  }
  return plan;
}

}  // namespace oomcast::planner
