// `checkpointing: auto`, the advisor's half: picks which blocks (or which ops inside them) to
// checkpoint so the step fits the device with the scenario's margin at the least recompute
// time. The requirement comes from simulated peaks; the choice from the planner's knapsack
// (planner/timing/checkpoint_knapsack.h); the result is simulated again until it fits.
#pragma once

#include <optional>
#include <string>

#include "advisor/predict.h"
#include "scenario/scenario.h"

namespace oomcast::advisor {

// The scenario with checkpointing.units filled in; unchanged unless its mode is auto and
// unresolved. A model without blocks gets mode none. `prediction`, when given, receives the
// prediction of the returned scenario when the choice simulated it (its last round), so that
// predict() need not plan and replay the same scenario again; none when nothing was simulated.
scenario::Scenario resolve_auto_checkpointing(const scenario::Scenario& scenario,
                                              std::optional<Prediction>* prediction = nullptr);

// "12 of 32 blocks: 8 full, 4 attention" for a resolved auto section; "" otherwise.
std::string auto_checkpointing_summary(const scenario::CheckpointConfig& config);

}  // namespace oomcast::advisor
