// Checkpoint policies: full (every block), every n-th block, selective (PyTorch's
// selective-checkpoint API: ops of the listed kinds are recomputed, the others' outputs kept),
// and auto, resolved per block (each block full, selective or off, as the advisor chose).
#include "planner/checkpointing.h"

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
  if (config.mode == CheckpointMode::None) return plan;

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
    if (config.recompute_ops.empty()) {
      throw InputError(SourceLocation{}, "checkpointing.recompute_ops", "selective checkpointing needs recompute_ops");
    }
    unit_kinds.assign(num_units, kinds_of(config.recompute_ops));
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
    plan.unit_checkpointed[unit] = on ? 1 : 0;
  }
  auto recompute_kind = [&](size_t unit, OpKind kind) { return unit_kinds[unit][static_cast<size_t>(kind)] != 0; };

  std::vector<int32_t> producer_unit(graph.tensors.size(), -1);
  std::vector<OpKind> producer_kind(graph.tensors.size(), OpKind::Constant);
  std::vector<uint8_t> has_producer(graph.tensors.size(), 0);
  for (const OpNode& op : graph.ops) {
    for (TensorId out : op.outputs) {
      producer_unit[out] = op.unit;
      producer_kind[out] = op.kind;
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
    bool recompute_this = !selective || recompute_kind(u, op.kind);
    for (size_t i = 0; i < op.saved.size(); ++i) {
      TensorId tensor = graph.tensors[op.saved[i]].storage;
      bool inside = has_producer[tensor] && producer_unit[tensor] == op.unit;
      if (!inside) continue;  // block inputs and parameters stay (the checkpoint keeps its inputs)
      bool dropped = !selective || recompute_kind(u, producer_kind[tensor]);
      plan.saved_dropped[op_index][i] = dropped ? 1 : 0;
      if (dropped) plan.unit_recompute_stop[u] = std::max(plan.unit_recompute_stop[u], order.position[op_index]);
    }
    if (recompute_this && op.kind != OpKind::ScopeEnd) plan.recomputed[op_index] = 1;
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
    for (TensorId in : op.inputs) {
      TensorId storage = graph.tensors[in].storage;
      bool inside = has_producer[storage] && producer_unit[storage] == op.unit;
      const TensorRole role = graph.tensors[storage].role;
      bool activation = role == TensorRole::Activation || role == TensorRole::AutocastWeight;
      if (!inside && activation && has_producer[storage]) {
        plan.unit_kept[u].push_back(storage);  // a block input: checkpoint keeps it
      } else if (inside && unit_selective[u] && !recompute_kind(u, producer_kind[storage])) {
        plan.unit_kept[u].push_back(storage);  // SAC caches the outputs of "save" ops
      }
      if (inside) plan.recompute_last_use[in] = std::max(plan.recompute_last_use[in], position);
    }
  }
  // Outputs of recomputed ops used outside the unit (the block output, autocast casts held by
  // the cache) live until the recompute ends.
  for (uint32_t op_index : order.order) {
    const OpNode& op = graph.ops[op_index];
    if (op.unit < 0) continue;
    for (TensorId in : op.inputs) {
      int32_t unit = producer_unit[in];
      if (unit >= 0 && unit != op.unit && has_producer[in]) plan.recompute_last_use[in] = INT32_MAX;
    }
  }
  for (const OpNode& op : graph.ops) {
    if (op.unit >= 0) continue;
    for (TensorId in : op.inputs) {
      if (producer_unit[in] >= 0) plan.recompute_last_use[in] = INT32_MAX;
    }
  }
  for (auto& kept : plan.unit_kept) {
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  }
  return plan;
}

}  // namespace oomcast::planner
