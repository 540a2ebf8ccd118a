// Activation checkpointing (../shared/docs/training-memory-model.md §5): which blocks are checkpointed,
// which saved tensors their forward drops, which ops backward recomputes (and how far), and
// what the checkpoint itself keeps alive (the block inputs; SAC's cached outputs).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/layer_graph.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

struct CheckpointPlan {
  std::vector<uint8_t> unit_checkpointed;              // per unit
  std::vector<int32_t> unit_first_position;            // per unit, in ExecutionOrder positions
  std::vector<int32_t> unit_last_position;
  std::vector<int32_t> unit_recompute_stop;            // last position backward recomputes (early stop)
  std::vector<std::vector<uint8_t>> saved_dropped;     // per op, parallel to OpNode::saved
  std::vector<uint8_t> recomputed;                     // per op: re-run before the unit's backward
  // Per unit: activations the checkpoint keeps from forward until the unit's backward ends
  // (the block's inputs for full checkpointing, SAC-cached outputs for selective).
  std::vector<std::vector<TensorId>> unit_kept;
  // Per tensor made by a recomputed op: the position of its last recomputed consumer, -1 if
  // none (freed at once), INT32_MAX if it is used outside the unit (freed when recompute ends).
  std::vector<int32_t> recompute_last_use;
  // Per unit: checkpointed by the reentrant CheckpointFunction (its ctx, and so the forward RNG
  // state, lives with the graph) rather than the non-reentrant frame (freed with the unit's
  // saved inputs at the end of its backward).
  std::vector<uint8_t> unit_reentrant;
  // Per op, parallel to OpNode::saved: copied to host memory by activation offloading
  // (planner/activation_offload.h); empty when offloading is off.
  std::vector<std::vector<uint8_t>> saved_offloaded;

  bool any() const;
};

// Throws InputError for an unknown op kind in checkpointing.recompute_ops.
CheckpointPlan plan_checkpointing(const LayerGraph& graph, const ExecutionOrder& order, const scenario::CheckpointConfig& config);

}  // namespace oomcast::planner
