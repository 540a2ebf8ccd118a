// Mixture-of-experts ops: top-k routing (fp32 softmax, topk, renormalisation, cast), row
// gathers by an index (x[top_x]), index_add_ into an accumulator, sigmoid and row means.
#include "planner/ops/op_catalogue.h"
#include "planner/torch_release_facts.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

Routing top_k_routing(GraphBuilder& g, std::string_view leaf, TensorId logits, int64_t experts, int64_t top_k,
                      bool normalize, DType weights_dtype) {
  std::string name(leaf);
  const uint64_t rows = g.tensor(logits).numel / static_cast<uint64_t>(experts);
  const uint64_t chosen = rows * static_cast<uint64_t>(top_k);
  Routing routing;
  // F.softmax(router_logits, dim=1, dtype=torch.float): the fp32 copy, then the softmax,
  // which saves its result.
  TensorId logits32 = g.cast(logits, DType::Float32, name + ".logits_float");
  routing.probabilities = g.activation(name + ".softmax", g.tensor(logits32).numel, DType::Float32);
  OpNode& softmax_op = g.add_op(OpKind::Softmax, name + ".softmax", {logits32}, {routing.probabilities}, {GradRule::New});
  softmax_op.saved.push_back(routing.probabilities);
  g.finish_op(softmax_op);
  // torch.topk: values [rows, k] and int64 indices; TopkBackward saves the indices and
  // scatters the grad into zeros of the input's size.
  TensorId values = g.activation(name + ".topk.values", chosen, DType::Float32);
  routing.selected = g.activation(name + ".topk.indices", chosen, DType::Int64);
  OpNode& topk_op = g.add_op(OpKind::TopK, name + ".topk", {routing.probabilities}, {values, routing.selected},
                             {GradRule::New});
  topk_op.saved.push_back(routing.selected);
  g.finish_op(topk_op);
  TensorId weights = values;
  if (normalize) {
    // routing_weights /= routing_weights.sum(dim=-1, keepdim=True): the [rows, 1] sum, then
    // the division, which keeps both operands for its backward.
    TensorId sum = g.activation(name + ".sum", rows, DType::Float32);
    OpNode& sum_op = g.add_op(OpKind::Mean, name + ".sum", {values}, {sum}, {GradRule::New});
    g.finish_op(sum_op);
    TensorId divided = g.activation(name + ".normalized", chosen, DType::Float32);
    OpNode& div_op = g.add_op(OpKind::Mul, name + ".div", {values, sum}, {divided}, {GradRule::New, GradRule::New});
    div_op.saved = {values, sum};
    g.finish_op(div_op);
    weights = divided;
  }
  routing.weights = g.cast(weights, weights_dtype, name + ".to_dtype");
  return routing;
}

TensorId gather_rows(GraphBuilder& g, std::string_view leaf, TensorId source, TensorId index, uint64_t numel) {
  std::string name(leaf);
  TensorId out = g.activation(name, numel, g.tensor(source).dtype);
  // IndexBackward saves the indices and index_put_s the grad into zeros of source's size.
  OpNode& op = g.add_op(OpKind::Gather, name, {source, index}, {out}, {GradRule::New, GradRule::None});
  op.saved.push_back(index);
  g.finish_op(op);
  return out;
}

TensorId index_add(GraphBuilder& g, std::string_view leaf, TensorId accumulator, TensorId index, TensorId source) {
  std::string name(leaf);
  TensorId out = g.view(accumulator, name + ".out", g.tensor(accumulator).numel);
  // index_add_ writes in place; its backward passes the grad to the accumulator and
  // index_selects a [rows, hidden] grad for the source. The formula's
  // expand_as(source) keeps the source itself, not only its sizes (capture
  // mixtral-tiny-2x2-sgd: one [rows, hidden] per expert more than the index).
  OpNode& op = g.add_op(OpKind::IndexAdd, name, {accumulator, index, source}, {out},
                        {GradRule::PassThrough, GradRule::None, GradRule::New});
  op.saved.push_back(index);
  if (g.tensor(source).requires_grad) op.saved.push_back(source);
  g.finish_op(op);
  return out;
}

TensorId sigmoid(GraphBuilder& g, std::string_view leaf, TensorId x) {
  std::string name(leaf);
  TensorId out = g.activation(name + ".out", g.tensor(x).numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Sigmoid, name, {x}, {out}, {GradRule::New});
  op.saved.push_back(out);
  g.finish_op(op);
  return out;
}

TensorId mean_rows(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel) {
  std::string name(leaf);
  TensorId out = g.activation(name, numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Mean, name, {x}, {out}, {GradRule::New});
  if (torch_release_facts(g.context().torch_version).mean_saves_input) op.saved.push_back(x);  // 1.x saves self
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
