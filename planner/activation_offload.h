// Activation offloading (scenario activation_offloading): which saved tensors the forward's
// saved-tensor hooks copy to host memory. The GraphRunner then does not keep their device
// storage for backward, and allocates a device copy when the node's backward unpacks them.
#pragma once

#include <cstdint>

#include "planner/checkpointing.h"
#include "planner/layer_graph.h"
#include "scenario/activation_offload_config.h"

namespace oomcast::planner {

// Fills plan->saved_offloaded (per op, parallel to OpNode::saved; left empty when offloading
// is off). Returns the bytes copied to host memory by one forward (the host staging one
// micro-batch needs while its graph lives).
uint64_t plan_activation_offload(const LayerGraph& graph, const ExecutionOrder& order,
                                 const scenario::ActivationOffloadConfig& config, CheckpointPlan* plan);

}  // namespace oomcast::planner
