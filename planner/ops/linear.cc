// nn.Linear: addmm(bias, x2d, W.t()) (or mm without bias) on the flattened input.
// Autocast "lower" class: the input is cast per call, the weight through the autocast cache.
// A linear whose module the job adapts (LoRA) or stores quantized goes through
// linear_variants.cc first.
#include "planner/ops/cpu_gemm_buffer.h"
#include "planner/ops/linear_variants.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                int64_t in_features, int64_t out_features, bool copy_input) {
  if (g.context().job != nullptr) {
    return job_linear(g, leaf, x, weight, bias, in_features, out_features, copy_input);
  }
  return dense_linear(g, leaf, x, weight, bias, in_features, out_features, copy_input);
}

TensorId dense_linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                      int64_t in_features, int64_t out_features, bool copy_input) {
  const PrecisionRules& rules = g.precision();
  std::string name(leaf);
  TensorId x_compute = g.cast(x, rules.matmul_dtype(g.tensor(x).dtype), name + ".input_cast");
  if (copy_input) x_compute = copy(g, name + ".input_contiguous", x_compute);
  TensorId w_compute = g.autocast_weight(weight);
  TensorId b_compute = bias == kNoTensor ? kNoTensor : g.autocast_weight(bias);

  uint64_t rows = g.tensor(x).numel / static_cast<uint64_t>(in_features);
  TensorId out = g.activation(name + ".out", rows * static_cast<uint64_t>(out_features), g.tensor(x_compute).dtype);

  // AddmmBackward computes the grads of (self = bias, mat1 = input, mat2 = weight) in that
  // order; the bias grad is a sum_to over the rows (a new [out] tensor).
  std::vector<TensorId> inputs;
  std::vector<GradRule> rules_per_input;
  if (b_compute != kNoTensor) {
    inputs.push_back(b_compute);
    rules_per_input.push_back(GradRule::New);
  }
  inputs.push_back(x_compute);
  rules_per_input.push_back(GradRule::New);
  inputs.push_back(w_compute);
  rules_per_input.push_back(GradRule::New);

  bool x_requires_grad = g.tensor(x_compute).requires_grad;
  bool w_requires_grad = g.tensor(w_compute).requires_grad;
  OpNode& op = g.add_op(OpKind::Linear, name, std::move(inputs), {out}, std::move(rules_per_input));
  op.uses_cublas = true;
  op.forward_flops = 2.0 * static_cast<double>(rows) * static_cast<double>(in_features) * static_cast<double>(out_features);
  // mm_mat2_backward needs mat1 (the input) only for the weight's gradient, and
  // mm_mat1_backward needs mat2 (the weight) only for the input's gradient (§1.1 guards).
  if (w_requires_grad) op.saved.push_back(x_compute);
  if (x_requires_grad) op.saved.push_back(w_compute);
  // The CPU's bf16 GEMMs: x (rows x in) times Wᵀ (in x out), each with its fp32 result.
  add_cpu_bf16_gemm_buffers(g, op, name, g.tensor(x_compute).dtype, rows, static_cast<uint64_t>(out_features),
                            static_cast<uint64_t>(in_features), x_requires_grad, w_requires_grad);
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
