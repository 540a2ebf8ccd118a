// Elementwise ops: activations (gelu, silu, tanh, relu), add, mul, scale, dropout, softmax
// and history-free constants. Rows of ../shared/docs/training-memory-model.md §2.1 and §2.4.
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

namespace {

// An op with one new output shaped like x that saves `save_input` / `save_output`.
TensorId unary(GraphBuilder& g, OpKind kind, std::string_view leaf, TensorId x, bool save_input, bool save_output) {
  std::string name(leaf);
  TensorId out = g.activation(name + ".out", g.tensor(x).numel, g.tensor(x).dtype);
  OpNode& op = g.add_op(kind, name, {x}, {out}, {GradRule::New});
  if (save_input) op.saved.push_back(x);
  if (save_output) op.saved.push_back(out);
  g.finish_op(op);
  return out;
}

}  // namespace

TensorId gelu(GraphBuilder& g, std::string_view leaf, TensorId x) {
  return unary(g, OpKind::Gelu, leaf, x, /*save_input=*/true, /*save_output=*/false);
}

TensorId silu(GraphBuilder& g, std::string_view leaf, TensorId x) {
  return unary(g, OpKind::Silu, leaf, x, true, false);
}

TensorId tanh(GraphBuilder& g, std::string_view leaf, TensorId x) {
  return unary(g, OpKind::Tanh, leaf, x, false, true);
}

TensorId relu(GraphBuilder& g, std::string_view leaf, TensorId x, bool in_place) {
  if (!in_place) return unary(g, OpKind::Relu, leaf, x, false, true);
  // relu_ overwrites x: the result is x's storage, and threshold_backward saves it.
  std::string name(leaf);
  TensorId out = g.view(x, name + ".out", g.tensor(x).numel);
  OpNode& op = g.add_op(OpKind::Relu, name, {x}, {out}, {GradRule::New});
  op.saved.push_back(out);
  g.finish_op(op);
  return out;
}

TensorId add(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b, bool in_place) {
  std::string name(leaf);
  DType dtype = promote_types(g.tensor(a).dtype, g.tensor(b).dtype);
  uint64_t numel = std::max(g.tensor(a).numel, g.tensor(b).numel);
  TensorId out = in_place ? g.view(a, name + ".out", numel) : g.activation(name + ".out", numel, dtype);
  // add passes its grad to both inputs; the engine casts it (a new tensor) for an input of
  // another dtype and sum_to-reduces it for a broadcast input.
  auto rule_for = [&](TensorId input) {
    const TensorDesc& desc = g.tensor(input);
    return (desc.dtype == dtype && desc.numel == numel) ? GradRule::PassThrough : GradRule::New;
  };
  GradRule rule_a = rule_for(a);
  GradRule rule_b = rule_for(b);
  OpNode& op = g.add_op(OpKind::Add, name, {a, b}, {out}, {rule_a, rule_b});
  g.finish_op(op);
  return out;
}

TensorId mul(GraphBuilder& g, std::string_view leaf, TensorId a, TensorId b) {
  std::string name(leaf);
  DType dtype = promote_types(g.tensor(a).dtype, g.tensor(b).dtype);
  uint64_t numel = std::max(g.tensor(a).numel, g.tensor(b).numel);
  TensorId out = g.activation(name + ".out", numel, dtype);
  bool a_requires_grad = g.tensor(a).requires_grad;
  bool b_requires_grad = g.tensor(b).requires_grad;
  uint64_t b_numel = g.tensor(b).numel;
  OpNode& op = g.add_op(OpKind::Mul, name, {a, b}, {out}, {GradRule::New, GradRule::New});
  // mul_tensor_backward(grad, other) for self, (grad, self) for other: each operand is saved
  // only when the other one needs a gradient.
  if (a_requires_grad) op.saved.push_back(b);
  if (b_requires_grad) op.saved.push_back(a);
  if (b_requires_grad && b_numel < numel) {
    // grad * self is computed at full size, then sum_to reduces it to b's shape.
    op.backward_transients.push_back(Transient{g.intern(name + ".unreduced_grad"), numel * dtype_bytes(dtype), true});
  }
  g.finish_op(op);
  return out;
}

TensorId scale(GraphBuilder& g, std::string_view leaf, TensorId x) {
  return unary(g, OpKind::Mul, leaf, x, false, false);
}

TensorId dropout(GraphBuilder& g, std::string_view leaf, TensorId x) { return dropout_with(g, leaf, x, g.active_dropout()); }

TensorId dropout_with(GraphBuilder& g, std::string_view leaf, TensorId x, double p) {
  // F.dropout with p == 0 or in eval mode returns its input unchanged (Dropout.cpp).
  if (p <= 0.0) return x;
  std::string name(leaf);
  uint64_t numel = g.tensor(x).numel;
  if (g.context().cpu_kernels) {
    // CPU has no fused native_dropout (is_fused_kernel_acceptable wants CUDA): _dropout_impl
    // makes noise = empty_like(x).bernoulli_(1 - p).div_(1 - p) in x's dtype, then x * noise,
    // and MulBackward saves the noise (validate/op_probe.py: 4 B/element in fp32, before the
    // output).
    TensorId noise = g.activation(name + ".noise", numel, g.tensor(x).dtype);
    TensorId out = g.activation(name + ".out", numel, g.tensor(x).dtype);
    OpNode& op = g.add_op(OpKind::Dropout, name, {x}, {noise, out}, {GradRule::New});
    op.saved.push_back(noise);
    g.finish_op(op);
    return out;
  }
  TensorId out = g.activation(name + ".out", numel, g.tensor(x).dtype);
  TensorId mask = g.activation(name + ".mask", numel, DType::Bool);
  OpNode& op = g.add_op(OpKind::Dropout, name, {x}, {out, mask}, {GradRule::New});
  op.saved.push_back(mask);  // native_dropout_backward(grad, mask, scale): the mask only
  g.finish_op(op);
  return out;
}

TensorId softmax(GraphBuilder& g, std::string_view leaf, TensorId x) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  TensorId input = x;
  DType out_dtype = g.tensor(x).dtype;
  if (rules.upcasts_to_fp32(out_dtype)) {
    out_dtype = DType::Float32;
    // softmax is in autocast's set-opt-dtype list: bf16 gets an fp32 copy first, fp16 uses
    // the fused half_to_float kernel (SoftMax.cpp special-cases Half only).
    if (g.tensor(x).dtype != DType::Float16) input = g.cast(x, DType::Float32, name + ".input_cast");
  }
  TensorId out = g.activation(name + ".out", g.tensor(x).numel, out_dtype);
  OpNode& op = g.add_op(OpKind::Softmax, name, {input}, {out}, {GradRule::New});
  op.saved.push_back(out);
  g.finish_op(op);
  return out;
}

TensorId constant(GraphBuilder& g, std::string_view leaf, uint64_t numel, DType dtype, TensorId from) {
  std::string name(leaf);
  TensorId out = g.activation(name, numel, dtype);
  std::vector<TensorId> inputs;
  std::vector<GradRule> grads;
  if (from != kNoTensor) {
    inputs.push_back(from);
    grads.push_back(GradRule::None);
  }
  OpNode& op = g.add_op(OpKind::Constant, name, inputs, {out}, grads);
  g.finish_op(op);
  return out;
}

}  // namespace oomcast::planner::ops
