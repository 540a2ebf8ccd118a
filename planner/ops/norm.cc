// Normalisations: nn.LayerNorm (native_layer_norm, autocast fp32 class) and HF's Python
// RMSNorm (LlamaRMSNorm), which is a chain of primitive ops each saving its own operands.
#include "planner/ops/op_catalogue.h"
#include "planner/torch_release_facts.h"

namespace oomcast::planner::ops {

using scenario::OpKind;

TensorId layer_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    int64_t hidden, bool noncontiguous_input) {
  std::string name(leaf);
  const PrecisionRules& rules = g.precision();
  TensorId input = rules.upcasts_to_fp32(g.tensor(x).dtype) ? g.cast(x, DType::Float32, name + ".input_cast") : x;
  uint64_t numel = g.tensor(input).numel;
  uint64_t rows = numel / static_cast<uint64_t>(hidden);
  TensorId out = g.activation(name + ".out", numel, g.tensor(input).dtype);
  // mean and rstd are kept in the accumulate dtype: fp32 for every input dtype we model.
  TensorId mean = g.activation(name + ".mean", rows, DType::Float32);
  TensorId rstd = g.activation(name + ".rstd", rows, DType::Float32);
  std::vector<TensorId> inputs{input, weight};
  std::vector<GradRule> grads{GradRule::New, GradRule::New};
  if (bias != kNoTensor) {
    inputs.push_back(bias);
    grads.push_back(GradRule::New);
  }
  OpNode& op = g.add_op(OpKind::LayerNorm, name, inputs, {out, mean, rstd}, grads);
  op.saved = {input, weight};
  if (bias != kNoTensor) op.saved.push_back(bias);
  op.saved.push_back(mean);
  op.saved.push_back(rstd);
  if (noncontiguous_input) {
    // layer_norm_cpu / layer_norm_cuda and their backwards: X = input.expect_contiguous(), a
    // copy made before the outputs and freed when the kernel returns (validate/op_probe.py
    // layer_norm_noncontig: fwd +copy +out +mean +rstd -copy; bwd +copy +dX ... -copy).
    uint64_t bytes = numel * dtype_bytes(g.tensor(input).dtype);
    op.forward_transients.push_back(Transient{g.intern(name + ".input_contiguous"), bytes, false});
    op.backward_transients.push_back(Transient{g.intern(name + ".input_contiguous"), bytes, false});
  }
  g.finish_op(op);
  return out;
}

namespace {

// x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) on the fp32 copy of x, as HF's Python
// RMSNorms write it.
TensorId rms_normalize(GraphBuilder& g, const std::string& name, TensorId x32, int64_t hidden) {
  uint64_t numel = g.tensor(x32).numel;
  uint64_t rows = numel / static_cast<uint64_t>(hidden);
  // variance = hidden_states.pow(2).mean(-1, keepdim=True): pow saves its input.
  TensorId squared = g.activation(name + ".pow", numel, DType::Float32);
  OpNode& pow_op = g.add_op(OpKind::Pow, name + ".pow", {x32}, {squared}, {GradRule::New});
  pow_op.saved = {x32};
  g.finish_op(pow_op);
  TensorId variance = g.activation(name + ".variance", rows, DType::Float32);
  OpNode& mean_op = g.add_op(OpKind::Mean, name + ".mean", {squared}, {variance}, {GradRule::New});
  // Whether MeanBackward1 saves `self` (torch 1.x) or only its sizes (2.x): the squared input
  // then lives until the backward (planner/torch_release_facts.yaml, mean_saves_input).
  if (torch_release_facts(g.context().torch_version).mean_saves_input) mean_op.saved = {squared};
  g.finish_op(mean_op);
  // rsqrt(variance + eps): the add makes a small tensor, rsqrt saves its result.
  TensorId shifted = g.activation(name + ".variance_eps", rows, DType::Float32);
  OpNode& eps_op = g.add_op(OpKind::Add, name + ".add_eps", {variance}, {shifted}, {GradRule::PassThrough});
  g.finish_op(eps_op);
  TensorId inv = g.activation(name + ".rsqrt", rows, DType::Float32);
  OpNode& rsqrt_op = g.add_op(OpKind::Rsqrt, name + ".rsqrt", {shifted}, {inv}, {GradRule::New});
  rsqrt_op.saved = {inv};
  g.finish_op(rsqrt_op);
  // hidden_states * rsqrt: both operands need grads, so both are saved.
  return mul(g, name + ".normalize", x32, inv);
}

}  // namespace

TensorId rms_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, int64_t hidden) {
  std::string name(leaf);
  DType input_dtype = g.tensor(x).dtype;
  // hidden_states.to(torch.float32): a no-op for fp32 inputs.
  TensorId x32 = g.cast(x, DType::Float32, name + ".to_fp32");
  TensorId normalized = rms_normalize(g, name, x32, hidden);
  // .to(input_dtype) then weight * hidden_states.
  TensorId back = g.cast(normalized, input_dtype, name + ".to_input_dtype");
  return mul(g, name + ".weight_mul", back, weight);
}

TensorId offset_rms_norm(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, int64_t hidden) {
  std::string name(leaf);
  DType input_dtype = g.tensor(x).dtype;
  TensorId x32 = g.cast(x, DType::Float32, name + ".to_fp32");
  TensorId normalized = rms_normalize(g, name, x32, hidden);
  // output * (1.0 + self.weight.float()): a [hidden] fp32 weight, then the product in fp32,
  // cast back with type_as(x) last.
  TensorId weight32 = g.cast(weight, DType::Float32, name + ".weight_float");
  TensorId shifted = g.activation(name + ".one_plus_weight", g.tensor(weight32).numel, DType::Float32);
  OpNode& shift = g.add_op(OpKind::Add, name + ".one_plus_weight", {weight32}, {shifted}, {GradRule::PassThrough});
  g.finish_op(shift);
  TensorId product = mul(g, name + ".weight_mul", normalized, shifted);
  return g.cast(product, input_dtype, name + ".type_as");
}

}  // namespace oomcast::planner::ops
