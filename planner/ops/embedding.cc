// nn.Embedding: a gather from the table. Not an autocast op, so it returns the table's dtype
// (fp32 under autocast, which keeps the residual stream fp32).
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId embedding(GraphBuilder& g, std::string_view leaf, TensorId indices, TensorId weight, int64_t dim) {
  std::string name(leaf);
  uint64_t tokens = g.tensor(indices).numel;
  TensorId out = g.activation(name + ".out", tokens * static_cast<uint64_t>(dim), g.tensor(weight).dtype);
  OpNode& op = g.add_op(OpKind::Embedding, name, {indices, weight}, {out}, {GradRule::None, GradRule::New});
  op.saved.push_back(indices);  // embedding_backward needs only the indices (and the table size)
  // embedding_dense_backward sorts the indices: sorted copy plus original positions, int64
  // each [mem]; the grad itself is a zero-filled table of the full size.
  op.backward_transients.push_back(Transient{g.intern(name + ".sorted_indices"), tokens * 8, false});
  op.backward_transients.push_back(Transient{g.intern(name + ".orig_indices"), tokens * 8, false});
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
