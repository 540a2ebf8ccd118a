// Resolving checkpointing: auto. The first simulation (nothing checkpointed) gives the peak
// over the target (usable × (1 − margin)); the knapsack frees that much at the least
// recompute time; the allocator's rounding and the timing of the peak can make the freed
// bytes save less than their sum, so the deficit left is added and the choice redone, a few
// rounds at most.
#include "advisor/auto_checkpointing.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "advisor/predict.h"
#include "planner/jobs/training_job.h"
#include "planner/timing/checkpoint_knapsack.h"

namespace oomcast::advisor {

using planner::CheckpointChoice;
using planner::CheckpointCosts;
using planner::build_training_graph;
using planner::checkpoint_config_for;
using planner::checkpoint_costs;
using planner::choose_checkpoints;
using scenario::CheckpointConfig;
using scenario::CheckpointMode;
using scenario::Scenario;
using scenario::UnitCheckpoint;

namespace {

constexpr int kRounds = 5;

}  // namespace

Scenario resolve_auto_checkpointing(const Scenario& scenario, std::optional<Prediction>* prediction) {
  if (scenario.checkpointing.mode != CheckpointMode::Auto || !scenario.checkpointing.units.empty()) return scenario;
  Scenario s = scenario;
  CheckpointCosts costs = checkpoint_costs(s, build_training_graph(s));
  if (costs.freed_bytes.empty()) {
    s.checkpointing.mode = CheckpointMode::None;
    return s;
  }
  const double margin = s.checkpointing.margin_fraction;
  s.checkpointing = checkpoint_config_for(choose_checkpoints(costs, 0.0), margin);
  Prediction p = predict(s);
  const double target = static_cast<double>(p.usable_bytes) * (1.0 - margin);
  double over = static_cast<double>(p.peak_reserved_bytes) - target;
  if (over > 0.0) {
    double need = over;
    for (int round = 0; round < kRounds; ++round) {
      CheckpointChoice choice = choose_checkpoints(costs, need);
      s.checkpointing = checkpoint_config_for(choice, margin);
      p = predict(s);
      over = static_cast<double>(p.peak_reserved_bytes) - target;
      if (over <= 0.0 || !choice.enough) break;
      need += std::max(over, 0.02 * need);
    }
  }
  // `p` is always the prediction of `s` as returned.
  if (prediction) *prediction = std::move(p);
  return s;
}

std::string auto_checkpointing_summary(const CheckpointConfig& config) {
  if (config.mode != CheckpointMode::Auto || config.units.empty()) return "";
  std::map<std::string, int> counts;
  int on = 0;
  for (const UnitCheckpoint& unit : config.units) {
    if (!unit.on) continue;
    ++on;
    ++counts[unit.choice];
  }
  std::string text = fmt::format("{} of {} blocks", on, config.units.size());
  std::string parts;
  for (const char* name : {"full", "attention", "activations"}) {
    if (counts.count(name)) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", counts[name], name);
  }
  return parts.empty() ? text : text + ": " + parts;
}

}  // namespace oomcast::advisor
