// What an op reads when it runs: its inputs, and the tensors its grad node saves that it did not
// produce. The execution order, the forward's release points and checkpointing's recompute all
// count a saved tensor as a use, so it lives until the op that saves it has run.
#pragma once

#include <algorithm>

#include "planner/layer_graph.h"

namespace oomcast::planner {

// Calls `visit` for each input of `op`, then for each tensor its grad node saves that is
// neither an input nor an output of `op`. Such a tensor must exist when the op runs and must
// not be freed before the op saves it: an in-place op saves a copy of the value it overwrites,
// made by an op before it and read by nothing else (the captured routers of Mixtral, Qwen3-MoE
// and DeepSeek-V3: `copy` of the top-k weights, then `div_` saves the copy).
template <typename Visit>
void for_each_read(const OpNode& op, Visit&& visit) {
  for (TensorId in : op.inputs) visit(in);
  for (TensorId saved : op.saved) {
    if (std::find(op.inputs.begin(), op.inputs.end(), saved) != op.inputs.end()) continue;
    if (std::find(op.outputs.begin(), op.outputs.end(), saved) != op.outputs.end()) continue;
    visit(saved);
  }
}

}  // namespace oomcast::planner
