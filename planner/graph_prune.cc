// drop_loss: a reverse sweep over the ops in creation order (a topological order) marks
// what the remaining named outputs need; scope ends are filtered afterwards, since holding
// a tensor never makes it needed.
#include "planner/graph_prune.h"

#include <algorithm>

namespace oomcast::planner {

using scenario::OpKind;

void drop_loss(LayerGraph& graph) {
  if (graph.loss == kNoTensor) return;
  graph.named_outputs.erase("loss");
  graph.loss = kNoTensor;
  std::vector<uint8_t> needed(graph.tensors.size(), 0);
  auto need = [&](TensorId tensor) {
    needed[tensor] = 1;
    needed[graph.tensors[tensor].storage] = 1;
  };
  for (const auto& [name, tensor] : graph.named_outputs) need(tensor);
  std::vector<uint8_t> keep(graph.ops.size(), 0);
  std::vector<uint8_t> produced_by_kept(graph.tensors.size(), 0);
  std::vector<uint8_t> produced(graph.tensors.size(), 0);
  for (size_t i = graph.ops.size(); i-- > 0;) {
    const OpNode& op = graph.ops[i];
    for (TensorId out : op.outputs) produced[out] = 1;
    if (op.kind == OpKind::ScopeEnd) continue;
    bool wanted = std::any_of(op.outputs.begin(), op.outputs.end(), [&](TensorId out) { return needed[out] != 0; });
    if (!wanted) continue;
    keep[i] = 1;
    for (TensorId out : op.outputs) produced_by_kept[out] = 1;
    for (TensorId in : op.inputs) need(in);
  }
  std::vector<OpNode> kept_ops;
  kept_ops.reserve(graph.ops.size());
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    OpNode& op = graph.ops[i];
    if (op.kind == OpKind::ScopeEnd) {
      std::vector<TensorId> inputs;
      std::vector<GradRule> rules;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        TensorId in = op.inputs[k];
        if (produced[in] && !produced_by_kept[in]) continue;
        inputs.push_back(in);
        rules.push_back(op.input_grads[k]);
      }
      if (inputs.empty()) continue;
      op.inputs = std::move(inputs);
      op.input_grads = std::move(rules);
      kept_ops.push_back(std::move(op));
    } else if (keep[i]) {
      kept_ops.push_back(std::move(op));
    }
  }
  graph.ops = std::move(kept_ops);
  std::vector<TensorId> inputs;
  for (TensorId input : graph.inputs) {
    if (needed[input]) inputs.push_back(input);
  }
  graph.inputs = std::move(inputs);
}

}  // namespace oomcast::planner
