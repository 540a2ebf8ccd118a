// A training job that trains nothing is a typo, not a plan: LoRA target_modules that adapt no
// module (PEFT raises "Target modules ... not found in the base model", peft/tuners/tuners_utils.py
// inject_adapter) and trainable/freeze patterns that leave every parameter frozen (torch.optim
// raises "optimizer got an empty parameter list", torch/optim/optimizer.py) are refused with a
// did-you-mean instead of planning a job whose memory means nothing.
#pragma once

#include "planner/layer_graph.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// Throws InputError naming training.trainable.lora.target_modules or training.trainable.
void check_something_trains(const scenario::Scenario& scenario, const LayerGraph& graph);

}  // namespace oomcast::planner
