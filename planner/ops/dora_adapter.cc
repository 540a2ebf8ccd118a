// DoRA on a linear, as PEFT 0.21.2 runs it in training (tuners/lora/variants.py
// DoraLinearVariant.forward, tuners/lora/dora.py DoraLinearLayer.forward) with lora_dropout 0:
//   x = x.to(lora_A dtype)
//   lora_weight = lora_B(lora_A(eye(in))).T          get_lora_weight: an [in, in] identity
//   weight = base weight .to(x.dtype)                 a copy only when the dtypes differ
//   weight_norm = norm(weight + s * lora_weight.detach(), dim=1)   no graph: [out, in] temporaries
//   mag_norm_scale = (magnitude / weight_norm.detach()).view(1, -1)
//   lora_result = lora_B(lora_A(x))
//   base_result = result (- bias)
//   result = result + ((mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * s)
// The identity, lora_A(eye) and lora_weight are locals of the forward: their graph is cut by
// detach(), so they (and what their nodes saved) die when the DoRA forward returns.
#include "planner/ops/dora_adapter.h"

#include "planner/ops/linear_variants.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::ops {

TensorId dora_branch(GraphBuilder& g, const std::string& name, TensorId x, TensorId result, TensorId weight,
                     TensorId bias, int64_t in_features, int64_t out_features, DType adapter_dtype) {
  const scenario::LoraConfig& lora = g.context().job->training.lora;
  const auto in = static_cast<uint64_t>(in_features);
  const auto out = static_cast<uint64_t>(out_features);
  const auto r = static_cast<uint64_t>(lora.r);
  TensorId lora_a = g.adapter_parameter(name + ".lora_A.default.weight", {lora.r, in_features}, adapter_dtype);
  TensorId lora_b = g.adapter_parameter(name + ".lora_B.default.weight", {out_features, lora.r}, adapter_dtype);
  // update_layer's weight norm happens as the magnitude is created, after lora_A and lora_B.
  g.adapter_init_work(name + ".lora_magnitude_vector.default.init", out * in * dtype_bytes(adapter_dtype));
  TensorId magnitude =
      g.adapter_parameter(name + ".lora_magnitude_vector.default.weight", {out_features}, adapter_dtype);
  const DType result_dtype = g.tensor(result).dtype;
  TensorId adapter_input = g.cast(x, adapter_dtype, name + ".lora_input_cast");
  g.begin_scope();  // DoraLinearLayer.forward's locals
  // get_lora_weight: lora_B(lora_A(x_eye)).T; no gradient ever reaches these nodes.
  TensorId eye = constant(g, name + ".dora_eye", in * in, adapter_dtype);
  TensorId eye_down = constant(g, name + ".dora_lora_A_eye", in * r, adapter_dtype, eye);
  TensorId lora_weight = constant(g, name + ".dora_lora_weight", in * out, adapter_dtype, eye_down);
  g.hold(eye);
  g.hold(eye_down);
  g.hold(lora_weight);
  TensorId base_weight = weight;
  if (g.tensor(weight).dtype != adapter_dtype) {
    base_weight = constant(g, name + ".dora_weight_cast", in * out, adapter_dtype, weight);
    g.hold(base_weight);
  }
  // get_weight_norm: s * lora_weight and the sum, [out, in] each, the first gone once the sum exists.
  TensorId weight_norm = g.activation(name + ".dora_weight_norm.out", out, adapter_dtype);
  OpNode& norm_op = g.add_op(scenario::OpKind::Constant, name + ".dora_weight_norm", {lora_weight, base_weight},
                             {weight_norm}, {GradRule::None, GradRule::None});
  const uint64_t matrix = in * out * dtype_bytes(adapter_dtype);
  norm_op.forward_transients = {Transient{g.intern(name + ".dora_scaled_lora_weight"), matrix, false, true},
                                Transient{g.intern(name + ".dora_weight_sum"), matrix, false, false}};
  g.finish_op(norm_op);
  TensorId scale_vector = mul(g, name + ".dora_magnitude_div", magnitude, weight_norm);  // saves weight_norm
  TensorId down = dense_linear(g, name + ".lora_A", adapter_input, lora_a, kNoTensor, in_features, lora.r, false);
  TensorId lora_result = dense_linear(g, name + ".lora_B", down, lora_b, kNoTensor, lora.r, out_features, false);
  TensorId base_result = result;
  if (bias != kNoTensor) base_result = add(g, name + ".dora_base_minus_bias", result, bias);
  TensorId scale_minus_one = scale(g, name + ".dora_scale_minus_one", scale_vector);
  TensorId base_part = mul(g, name + ".dora_base_mul", base_result, scale_minus_one);
  TensorId lora_part = scale(g, name + ".dora_lora_scaling", mul(g, name + ".dora_lora_mul", lora_result, scale_vector));
  TensorId dora = add(g, name + ".dora_add", base_part, lora_part);
  g.end_scope();
  TensorId sum = add(g, name + ".lora_add", result, dora);
  return g.cast(sum, result_dtype, name + ".lora_result_cast");
}

}  // namespace oomcast::planner::ops
