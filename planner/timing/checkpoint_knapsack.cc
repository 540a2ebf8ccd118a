// The costs come from plan_checkpointing itself: for each option, every block set to it, the
// bytes each block's saved set shrinks by (its retained activation storages, minus what the
// checkpoint keeps) and the forward time of the ops it re-runs. The knapsack is a dynamic
// programme over freed bytes in 1/1024ths of the requirement, one group (block) at a time.
#include "planner/timing/checkpoint_knapsack.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "planner/checkpointing.h"
#include "planner/timing/op_cost.h"

namespace oomcast::planner {

using scenario::CheckpointConfig;
using scenario::CheckpointMode;
using scenario::Scenario;
using scenario::UnitCheckpoint;

namespace {

constexpr size_t kResolution = 1024;

// Distinct activation storages unit by unit that stay alive from forward to backward.
std::vector<double> retained_bytes(const LayerGraph& graph, const CheckpointPlan& plan) {
  std::vector<std::set<TensorId>> retained(static_cast<size_t>(graph.num_units));
  for (size_t index = 0; index < graph.ops.size(); ++index) {
    const OpNode& op = graph.ops[index];
    if (op.unit < 0 || !op.records_grad_node) continue;
    for (size_t i = 0; i < op.saved.size(); ++i) {
      if (!plan.saved_dropped[index].empty() && plan.saved_dropped[index][i]) continue;
      TensorId storage = graph.tensors[op.saved[i]].storage;
      TensorRole role = graph.tensors[storage].role;
      if (role == TensorRole::Activation) retained[static_cast<size_t>(op.unit)].insert(storage);
    }
  }
  for (size_t unit = 0; unit < retained.size() && unit < plan.unit_kept.size(); ++unit) {
    retained[unit].insert(plan.unit_kept[unit].begin(), plan.unit_kept[unit].end());
  }
  std::vector<double> bytes(retained.size(), 0.0);
  for (size_t unit = 0; unit < retained.size(); ++unit) {
    for (TensorId storage : retained[unit]) bytes[unit] += static_cast<double>(graph.tensors[storage].bytes());
  }
  return bytes;
}

}  // namespace

const std::vector<CheckpointOption>& auto_checkpoint_options() {
  static const std::vector<CheckpointOption> options = {
      {"full", {}},
      {"attention", {"attention", "matmul", "softmax", "masked_fill", "dropout"}},
      {"activations", {"gelu", "silu", "relu", "tanh", "sigmoid"}},
  };
  return options;
}

CheckpointCosts checkpoint_costs(const Scenario& s, const LayerGraph& graph) {
  CheckpointCosts costs;
  if (graph.num_units <= 0) return costs;
  const auto units = static_cast<size_t>(graph.num_units);
  ExecutionOrder order = compute_execution_order(graph);
  const double micro = static_cast<double>(std::max<int64_t>(1, s.grad_accum_steps));
  std::vector<double> baseline = retained_bytes(graph, plan_checkpointing(graph, order, CheckpointConfig{}));
  const auto& options = auto_checkpoint_options();
  costs.freed_bytes.assign(units, std::vector<double>(options.size(), 0.0));
  costs.recompute_seconds.assign(units, std::vector<double>(options.size(), 0.0));
  for (size_t o = 0; o < options.size(); ++o) {
    CheckpointConfig config;
    config.mode = CheckpointMode::Auto;
    config.units.assign(units, UnitCheckpoint{true, options[o].name, options[o].recompute_ops});
    CheckpointPlan plan = plan_checkpointing(graph, order, config);
    std::vector<double> retained = retained_bytes(graph, plan);
    for (size_t unit = 0; unit < units; ++unit) costs.freed_bytes[unit][o] = std::max(0.0, baseline[unit] - retained[unit]);
    for (size_t index = 0; index < graph.ops.size(); ++index) {
      const OpNode& op = graph.ops[index];
      if (op.unit < 0 || !plan.recomputed[index]) continue;
      costs.recompute_seconds[static_cast<size_t>(op.unit)][o] +=
          micro * kernel_seconds(forward_cost(graph, op), op.kind, s.device.throughput);
    }
  }
  return costs;
}

CheckpointChoice choose_checkpoints(const CheckpointCosts& costs, double need_bytes) {
  CheckpointChoice choice;
  const size_t units = costs.freed_bytes.size();
  choice.option.assign(units, -1);
  if (need_bytes <= 0.0) {
    choice.enough = true;
    return choice;
  }
  const double quantum = need_bytes / static_cast<double>(kResolution);
  const double infinity = std::numeric_limits<double>::infinity();
  // best[u][b]: least recompute over units < u freeing at least b quanta (b capped at the need).
  std::vector<std::vector<double>> best(units + 1, std::vector<double>(kResolution + 1, infinity));
  std::vector<std::vector<int>> picked(units + 1, std::vector<int>(kResolution + 1, -1));
  std::vector<std::vector<size_t>> from(units + 1, std::vector<size_t>(kResolution + 1, 0));
  best[0][0] = 0.0;
  for (size_t u = 0; u < units; ++u) {
    for (size_t b = 0; b <= kResolution; ++b) {
      if (best[u][b] == infinity) continue;
      if (best[u][b] < best[u + 1][b]) {  // this unit not checkpointed
        best[u + 1][b] = best[u][b];
        picked[u + 1][b] = -1;
        from[u + 1][b] = b;
      }
      for (size_t o = 0; o < costs.freed_bytes[u].size(); ++o) {
        auto gained = static_cast<size_t>(std::min<double>(kResolution, std::floor(costs.freed_bytes[u][o] / quantum)));
        size_t reached = std::min(kResolution, b + gained);
        double cost = best[u][b] + costs.recompute_seconds[u][o];
        if (cost < best[u + 1][reached]) {
          best[u + 1][reached] = cost;
          picked[u + 1][reached] = static_cast<int>(o);
          from[u + 1][reached] = b;
        }
      }
    }
  }
  // The cheapest state that reaches the need; else the one that frees the most.
  size_t end = kResolution;
  while (end > 0 && best[units][end] == infinity) --end;
  choice.enough = end == kResolution;
  size_t b = end;
  for (size_t u = units; u > 0; --u) {
    const int o = picked[u][b];
    choice.option[u - 1] = o;
    if (o >= 0) {
      choice.freed_bytes += costs.freed_bytes[u - 1][static_cast<size_t>(o)];
      choice.recompute_seconds += costs.recompute_seconds[u - 1][static_cast<size_t>(o)];
    }
    b = from[u][b];
  }
  return choice;
}

CheckpointConfig checkpoint_config_for(const CheckpointChoice& choice, double margin_fraction) {
  CheckpointConfig config;
  config.mode = CheckpointMode::Auto;
  config.margin_fraction = margin_fraction;
  const auto& options = auto_checkpoint_options();
  for (int o : choice.option) {
    if (o < 0) {
      config.units.push_back(UnitCheckpoint{false, "none", {}});
    } else {
      const CheckpointOption& option = options[static_cast<size_t>(o)];
      config.units.push_back(UnitCheckpoint{true, option.name, option.recompute_ops});
    }
  }
  return config;
}

}  // namespace oomcast::planner
