// LoRA adapters and bitsandbytes-quantized base weights on a linear; the formulas and their
// sources are in docs/weight-formats.md.
//
// LoRA (PEFT lora.Linear.forward, PEFT >= 0.7): result = base_layer(x); x = x.to(lora_A dtype);
// result = result + lora_B(lora_A(lora_dropout(x))) * scaling; result.to(result dtype). The
// adapters are fp32 (get_peft_model's autocast_adapter_dtype), lora_A [r, in], lora_B [out, r].
//
// 4-bit (bnb Linear4bit -> MatMul4Bit): x.to(compute_dtype), the weight dequantized to the
// compute dtype as a temporary (with double quantization the absmax is dequantized first), F.linear,
// output cast back. Nothing is saved but the packed weight (a parameter); backward dequantizes
// again for the input's gradient. The weight gets no gradient.
//
// int8 (bnb Linear8bitLt, has_fp16_weights=False -> MatMul8bitLt): x.to(fp16), row-wise int8
// quantization of x (CA, SCA), an int32 product, dequantized to fp16; backward dequantizes CB
// to fp16 for the input's gradient.
#include <algorithm>
#include <string>

#include "planner/ops/linear_variants.h"
#include "planner/ops/op_catalogue.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner::ops {

using scenario::JobConfig;
using scenario::LoraConfig;
using scenario::OpKind;
using scenario::WeightFormat;
using scenario::WeightsConfig;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

bool four_bit(WeightFormat format) { return format == WeightFormat::Nf4 || format == WeightFormat::Fp4; }

// Rewrites a registered weight's storage into its quantized form and registers the
// quantization state as buffers of the module (once per weight).
void quantize_weight(GraphBuilder& g, const std::string& module, TensorId weight, int64_t out_features) {
  const WeightsConfig& weights = g.context().job->weights;
  TensorDesc& desc = g.mutable_tensor(weight);
  if (desc.dtype == DType::UInt8) return;  // already quantized (a weight used twice)
  const uint64_t numel = desc.numel;
  desc.requires_grad = false;  // bitsandbytes weights never get a gradient
  desc.dtype = DType::UInt8;
  if (four_bit(weights.format)) {
    desc.numel = ceil_div(numel, 2);  // Params4bit: two codes per byte
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    if (weights.double_quant) {
      g.buffer(module + ".weight.quant_state.absmax", blocks, DType::UInt8);
      g.buffer(module + ".weight.quant_state.nested_absmax", ceil_div(blocks, 256), DType::Float32);
      g.buffer(module + ".weight.quant_state.offset", 1, DType::Float32);
    } else {
      g.buffer(module + ".weight.quant_state.absmax", blocks, DType::Float32);
    }
    g.buffer(module + ".weight.quant_state.code", 16, DType::Float32);
  } else {
    g.buffer(module + ".weight.SCB", static_cast<uint64_t>(out_features), DType::Float32);  // per-row scales
  }
}

TensorId quantized_linear_op(GraphBuilder& g, const std::string& name, TensorId x, TensorId weight, TensorId bias,
                             int64_t in_features, int64_t out_features) {
  const WeightsConfig& weights = g.context().job->weights;
  const DType input_dtype = g.tensor(x).dtype;
  const bool four = four_bit(weights.format);
  const DType compute = four ? g.precision().parameter_dtype : DType::Float16;
  quantize_weight(g, g.qualified(name), weight, out_features);
  const auto rows = g.tensor(x).numel / static_cast<uint64_t>(in_features);
  const uint64_t numel = static_cast<uint64_t>(in_features) * static_cast<uint64_t>(out_features);
  TensorId x_compute = g.cast(x, compute, name + ".input_cast");
  TensorId out = g.activation(name + ".out", rows * static_cast<uint64_t>(out_features), compute);
  std::vector<TensorId> inputs{x_compute, weight};
  std::vector<GradRule> rules{GradRule::New, GradRule::None};
  if (bias != kNoTensor) {
    inputs.push_back(bias);
    rules.push_back(GradRule::New);
  }
  OpNode& op = g.add_op(OpKind::Linear, name, std::move(inputs), {out}, std::move(rules));
  op.uses_cublas = true;
  op.forward_flops = 2.0 * static_cast<double>(rows) * static_cast<double>(numel);
  const uint64_t dequantized = numel * dtype_bytes(compute);
  if (four) {
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    std::vector<Transient> dequantize;
    if (weights.double_quant) dequantize.push_back(Transient{g.intern(name + ".absmax_fp32"), blocks * 4, false});
    dequantize.push_back(Transient{g.intern(name + ".dequantized_weight"), dequantized, false});
    op.forward_transients = dequantize;
    op.backward_transients = dequantize;
  } else {
    op.forward_transients = {Transient{g.intern(name + ".CA"), rows * static_cast<uint64_t>(in_features), false},
                             Transient{g.intern(name + ".SCA"), rows * 4, false},
                             Transient{g.intern(name + ".out_int32"), rows * static_cast<uint64_t>(out_features) * 4, false}};
    op.backward_transients = {Transient{g.intern(name + ".dequantized_CB"), dequantized, false}};
  }
  g.finish_op(op);
  return g.cast(out, input_dtype, name + ".output_cast");
}

TensorId lora_branch(GraphBuilder& g, const std::string& name, TensorId x, TensorId result, int64_t in_features,
                     int64_t out_features) {
  const LoraConfig& lora = g.context().job->training.lora;
  TensorId lora_a = g.adapter_parameter(name + ".lora_A.default.weight", {lora.r, in_features}, DType::Float32);
  TensorId lora_b = g.adapter_parameter(name + ".lora_B.default.weight", {out_features, lora.r}, DType::Float32);
  const DType result_dtype = g.tensor(result).dtype;
  TensorId adapter_input = g.cast(x, DType::Float32, name + ".lora_input_cast");
  adapter_input = dropout_with(g, name + ".lora_dropout", adapter_input, g.context().training ? lora.dropout : 0.0);
  TensorId down = dense_linear(g, name + ".lora_A", adapter_input, lora_a, kNoTensor, in_features, lora.r, false);
  TensorId up = dense_linear(g, name + ".lora_B", down, lora_b, kNoTensor, lora.r, out_features, false);
  TensorId scaled = scale(g, name + ".lora_scaling", up);
  TensorId sum = add(g, name + ".lora_add", result, scaled);
  return g.cast(sum, result_dtype, name + ".lora_result_cast");
}

}  // namespace

QuantizedStorage quantized_storage(const WeightsConfig& weights, uint64_t numel, int64_t out_features) {
  QuantizedStorage storage;
  if (four_bit(weights.format)) {
    storage.weight_bytes = ceil_div(numel, 2);
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    storage.state_bytes = weights.double_quant ? blocks + ceil_div(blocks, 256) * 4 + 4 : blocks * 4;
    storage.state_bytes += 16 * 4;
  } else if (weights.format == WeightFormat::Int8) {
    storage.weight_bytes = numel;
    storage.state_bytes = static_cast<uint64_t>(out_features) * 4;
  }
  return storage;
}

TensorId job_linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    int64_t in_features, int64_t out_features, bool copy_input) {
  const JobConfig& job = *g.context().job;
  const std::string name(leaf);
  const std::string module = g.qualified(name);
  TensorId result = quantized_linear(job.weights, module)
                        ? quantized_linear_op(g, name, x, weight, bias, in_features, out_features)
                        : dense_linear(g, leaf, x, weight, bias, in_features, out_features, copy_input);
  if (!lora_targets(job.training.lora, module)) return result;
  return lora_branch(g, name, x, result, in_features, out_features);
}

}  // namespace oomcast::planner::ops
