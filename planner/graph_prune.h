// Prunes a LayerGraph to the ops some named outputs need: a model called without labels
// (`logits = model(input_ids)`) computes no loss, so the loss ops, the labels input and
// whatever only they consumed leave the graph.
#pragma once

#include <string>

#include "planner/layer_graph.h"

namespace oomcast::planner {

// Removes the loss and every op whose outputs nothing kept uses; the graph inputs no kept op
// reads leave graph.inputs. Scope ends keep only the tensors of kept ops.
void drop_loss(LayerGraph& graph);

}  // namespace oomcast::planner
