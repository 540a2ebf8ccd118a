// Activations that HF writes in Python rather than calling one kernel, so each step is an
// op with its own output and saved operands: NewGELUActivation (gelu_new, Phi and GPT-2's
// HF code): 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId gelu_tanh_python(GraphBuilder& g, std::string_view leaf, TensorId x) {
  std::string name(leaf);
  // Python evaluates 0.5 * input first, then the parenthesis, then the product.
  TensorId half_x = scale(g, name + ".half", x);
  TensorId cube = g.activation(name + ".pow", g.tensor(x).numel, g.tensor(x).dtype);
  OpNode& pow_op = g.add_op(OpKind::Pow, name + ".pow", {x}, {cube}, {GradRule::New});
  pow_op.saved = {x};
  g.finish_op(pow_op);
  TensorId scaled_cube = scale(g, name + ".cube_scale", cube);
  TensorId inner = add(g, name + ".inner", x, scaled_cube);
  TensorId inner_scaled = scale(g, name + ".sqrt_2_over_pi", inner);
  TensorId t = tanh(g, name + ".tanh", inner_scaled);
  TensorId one_plus = scale(g, name + ".one_plus", t);
  return mul(g, name + ".mul", half_x, one_plus);
}

}  // namespace oomcast::planner::ops
