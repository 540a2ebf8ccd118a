// F.cross_entropy = _log_softmax + nll_loss_forward (../shared/docs/training-memory-model.md §2.2).
// Autocast puts log_softmax in the fp32 set-dtype list: bf16 logits get an fp32 copy first,
// fp16 logits use the half_to_float kernel; the saved log-probabilities are fp32 either way.
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId cross_entropy(GraphBuilder& g, std::string_view leaf, TensorId logits, TensorId targets, int64_t classes) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  uint64_t numel = g.tensor(logits).numel;
  DType dtype = g.tensor(logits).dtype;
  TensorId input = logits;
  if (rules.upcasts_to_fp32(dtype)) {
    if (dtype != DType::Float16) input = g.cast(logits, DType::Float32, name + ".logits_fp32");
    dtype = DType::Float32;
  }
  TensorId log_probs = g.activation(name + ".log_softmax", numel, dtype);
  OpNode& log_softmax = g.add_op(OpKind::LogSoftmax, name + ".log_softmax", {input}, {log_probs}, {GradRule::New});
  log_softmax.saved.push_back(log_probs);  // _log_softmax_backward_data(grad, result, ...)
  g.finish_op(log_softmax);

  (void)classes;
  TensorId loss = g.activation(name + ".loss", 1, dtype);
  TensorId total_weight = g.activation(name + ".total_weight", 1, dtype);
  OpNode& nll = g.add_op(OpKind::NllLoss, name + ".nll_loss", {log_probs, targets}, {loss, total_weight},
                         {GradRule::New, GradRule::None});
  // nll_loss_backward(grad, self, target, ..., total_weight): its grad is a zero-filled
  // tensor of the full [N, classes] shape.
  nll.saved = {log_probs, targets, total_weight};
  g.finish_op(nll);
  return loss;
}

}  // namespace oomcast::planner::ops
