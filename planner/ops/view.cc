// Views and copies: reshape/transpose/select share storage; split shares it too but its
// backward cats the pieces' grads; contiguous() and non-viewable reshapes copy.
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId view(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel) {
  std::string name(leaf);
  TensorId out = g.view(x, name, numel);
  OpNode& op = g.add_op(OpKind::View, name, {x}, {out}, {GradRule::PassThrough});
  g.finish_op(op);
  return out;
}

std::vector<TensorId> split(GraphBuilder& g, std::string_view leaf, TensorId x, int pieces) {
  std::string name(leaf);
  uint64_t piece_numel = g.tensor(x).numel / static_cast<uint64_t>(pieces);
  std::vector<TensorId> outputs;
  for (int i = 0; i < pieces; ++i) outputs.push_back(g.view(x, name + "." + std::to_string(i), piece_numel));
  // split_backward: once every piece's grad has arrived, one cat of the full size.
  OpNode& op = g.add_op(OpKind::Split, name, {x}, outputs, {GradRule::New});
  g.finish_op(op);
  return outputs;
}

TensorId slice(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel) {
  std::string name(leaf);
  TensorId out = g.view(x, name, numel);
  OpNode& op = g.add_op(OpKind::View, name, {x}, {out}, {GradRule::New});
  g.finish_op(op);
  return out;
}

TensorId copy(GraphBuilder& g, std::string_view leaf, TensorId x) {
  std::string name(leaf);
  TensorId out = g.activation(name, g.tensor(x).numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Copy, name, {x}, {out}, {GradRule::PassThrough});
  g.finish_op(op);
  return out;
}

TensorId expand_copy(GraphBuilder& g, std::string_view leaf, TensorId x, uint64_t numel) {
  std::string name(leaf);
  TensorId out = g.activation(name, numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(OpKind::Copy, name, {x}, {out}, {GradRule::New});
  g.finish_op(op);
  return out;
}

TensorId cat(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b) {
  std::string name(leaf);
  TensorId out = g.activation(name, g.tensor(a).numel + g.tensor(b).numel, promote_types(g.tensor(a).dtype, g.tensor(b).dtype));
  // cat_tensors_backward hands each input a narrow() view of the grad: no allocation, but
  // the view keeps the whole grad alive; modelled as a pass-through.
  OpNode& op = g.add_op(OpKind::Cat, name, {a, b}, {out}, {GradRule::PassThrough, GradRule::PassThrough});
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
