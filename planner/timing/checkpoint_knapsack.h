// `checkpointing: auto`, the planner's half: for every block (checkpoint unit) and every
// option (the whole block, its attention scores, its MLP activations), the activation bytes
// the option frees and the recompute time it costs (planner/timing/step_time.h); and the
// multiple-choice knapsack that frees at least a required amount at the least recompute time.
// The advisor (advisor/auto_checkpointing.h) sets the requirement from simulated peaks.
#pragma once

#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

struct CheckpointOption {
  std::string name;                       // "full", "attention", "activations"
  std::vector<std::string> recompute_ops;  // op kinds recomputed; empty: the whole block
};

// The options auto chooses from, cheapest kind of recompute last.
const std::vector<CheckpointOption>& auto_checkpoint_options();

struct CheckpointCosts {
  // [unit][option]: activation bytes no longer kept from forward to backward, and the
  // recompute seconds of one optimizer step (every micro-batch).
  std::vector<std::vector<double>> freed_bytes;
  std::vector<std::vector<double>> recompute_seconds;
};

// Built from the scenario's training graph (build_training_graph, jobs/training_job.h); no
// units (a model without blocks): empty.
CheckpointCosts checkpoint_costs(const scenario::Scenario& scenario, const LayerGraph& graph);

struct CheckpointChoice {
  std::vector<int> option;      // per unit: index into auto_checkpoint_options(), -1 for none
  double freed_bytes = 0.0;
  double recompute_seconds = 0.0;
  bool enough = false;          // false: even checkpointing everything frees less than asked
};

// The least-recompute choice freeing at least `need_bytes` (0: nothing checkpointed). Exact
// up to a byte resolution of need/1024 (freed bytes are rounded down, so the choice never
// frees less than asked).
CheckpointChoice choose_checkpoints(const CheckpointCosts& costs, double need_bytes);

// The checkpointing section a choice stands for (mode auto, units resolved).
scenario::CheckpointConfig checkpoint_config_for(const CheckpointChoice& choice, double margin_fraction);

}  // namespace oomcast::planner
