// LoRA and IA3 adapters and bitsandbytes-quantized base weights on a linear; the formulas and their
// sources are in docs/weight-formats.md.
//
// LoRA (PEFT lora.Linear.forward, PEFT >= 0.7): result = base_layer(x); x = x.to(lora_A dtype);
// result = result + lora_B(lora_A(lora_dropout(x))) * scaling; result.to(result dtype). The
// adapters are fp32 (get_peft_model's autocast_adapter_dtype) unless lora.autocast_adapter_dtype
// is false, lora_A [r, in], lora_B [out, r].
//
// 4-bit (bnb Linear4bit -> MatMul4Bit): x.to(compute_dtype), the weight dequantized to the
// compute dtype as a temporary (with double quantization the absmax is dequantized first), F.linear,
// output cast back. Nothing is saved but the packed weight (a parameter); backward dequantizes
// again for the input's gradient. The weight gets no gradient.
//
// torchao NF4 (torchtune's QLoRA: LoRALinear / FrozenNF4Linear -> linear_nf4, torchao 0.19
// quantization/quantize_/workflows/nf4/nf4_tensor.py): F.linear(x, weight.to(x.dtype)) with no input
// cast; the weight is rebuilt by get_original_weight(), whose locals (the two code halves as
// int64 indices, their table lookups and scaled halves) live until it returns and whose result,
// the whole weight in its dtype, until F.linear has run. Only the NF4 weight is saved; backward
// rebuilds it the same way for the input's gradient.
//
// int8 (bnb Linear8bitLt, has_fp16_weights=False -> MatMul8bitLt): x.to(fp16), row-wise int8
// quantization of x (CA, SCA), an int32 product, dequantized to fp16; backward dequantizes CB
// to fp16 for the input's gradient.
#include <algorithm>
#include <string>

#include "planner/ops/linear_variants.h"
#include "planner/ops/dora_adapter.h"
#include "planner/ops/op_catalogue.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner::ops {

using scenario::Ia3Config;
using scenario::JobConfig;
using scenario::LoraConfig;
using scenario::OpKind;
using scenario::WeightFormat;
using scenario::WeightsConfig;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

bool four_bit(WeightFormat format) { return format == WeightFormat::Nf4 || format == WeightFormat::Fp4; }

// Rewrites a registered weight's storage into its quantized form and registers the
// quantization state as buffers of the module (once per weight); `module` is the linear's leaf
// name (the builder qualifies buffer names).
void quantize_weight(GraphBuilder& g, const std::string& module, TensorId weight, int64_t out_features) {
  const WeightsConfig& weights = g.context().job->weights;
  TensorDesc& desc = g.mutable_tensor(weight);
  if (desc.dtype == DType::UInt8) return;  // already quantized (a weight used twice)
  const uint64_t numel = desc.numel;
  desc.requires_grad = false;  // bitsandbytes weights never get a gradient
  desc.dtype = DType::UInt8;
  if (weights.library == scenario::QuantLibrary::Torchao) {
    // NF4Tensor.from_tensor: quantized_data (two codes per byte), quantized_scalers (int8, one per
    // block), quantization_factor (one per 256 scalers) and scaler_mean in the weight's dtype, and
    // the 16-entry nf4 table in the weight's dtype.
    const DType dtype = g.precision().parameter_dtype;
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    desc.numel = ceil_div(numel, 2);
    g.buffer(module + ".weight.quantized_scalers", blocks, DType::UInt8);
    g.buffer(module + ".weight.quantization_factor", ceil_div(blocks, 256), dtype);
    g.buffer(module + ".weight.scaler_mean", 1, dtype);
    g.buffer(module + ".weight.nf4", 16, dtype);
  } else if (four_bit(weights.format)) {
    desc.numel = ceil_div(numel, 2);  // Params4bit: two codes per byte
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    if (weights.double_quant) {
      g.buffer(module + ".weight.quant_state.absmax", blocks, DType::UInt8);
      g.buffer(module + ".weight.quant_state.nested_absmax", ceil_div(blocks, 256), DType::Float32);
      g.buffer(module + ".weight.quant_state.offset", 1, DType::Float32);
      // quantize_blockwise's QuantState keeps code.to(device, copy=True): the 256-entry map.
      g.buffer(module + ".weight.quant_state.nested_code", 256, DType::Float32);
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
  const bool torchao = weights.library == scenario::QuantLibrary::Torchao;
  // bnb_4bit_compute_dtype (the non-quantized parameters' dtype); torchao: the input's dtype.
  const DType compute = torchao ? input_dtype : four ? weights_parameter_dtype(weights, g.precision().parameter_dtype)
                                                     : DType::Float16;
  quantize_weight(g, name, weight, out_features);
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
  if (torchao) {
    // get_original_weight: (data >> 4).to(long) and (data & 15).to(long), nf4[...] of each,
    // each times the repeated scalers, then torch.stack: the weight in its dtype (and a copy
    // when x has another dtype). The locals die as it returns, before F.linear's output.
    const uint64_t half = ceil_div(numel, 2);
    const DType weight_dtype = g.precision().parameter_dtype;
    const uint64_t e = dtype_bytes(weight_dtype);
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    std::vector<Transient> rebuild = {
        Transient{g.intern(name + ".nf4_first_indices"), half * 8, false, true},
        Transient{g.intern(name + ".nf4_second_indices"), half * 8, false, true},
        Transient{g.intern(name + ".nf4_first_values"), half * e, false, true},
        Transient{g.intern(name + ".nf4_second_values"), half * e, false, true},
        Transient{g.intern(name + ".nf4_scalers"), blocks * e, false, true},
        Transient{g.intern(name + ".nf4_scaled_first"), half * e, false, true},
        Transient{g.intern(name + ".nf4_scaled_second"), half * e, false, true},
        Transient{g.intern(name + ".nf4_original_weight"), numel * e, false, compute != weight_dtype}};
    if (compute != weight_dtype) rebuild.push_back(Transient{g.intern(name + ".nf4_weight_to_input_dtype"), dequantized, false});
    op.forward_transients = rebuild;
    op.backward_transients = rebuild;
  } else if (four) {
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

// `base_dtype`: the base layer's weight dtype, or fp32 for a quantized (integer) one.
TensorId lora_branch(GraphBuilder& g, const std::string& name, TensorId x, TensorId result, int64_t in_features,
                     int64_t out_features, DType base_dtype) {
  const LoraConfig& lora = g.context().job->training.lora;
  // get_peft_model(autocast_adapter_dtype=True) upcasts 16-bit adapters to fp32; without it the
  // adapters keep the base layer's floating dtype (LoraLayer._move_adapter_to_device_of_base_layer,
  // PEFT 0.21.2), and the input cast (_cast_input_dtype) is a no-op when the dtypes agree.
  const DType adapter_dtype = lora.autocast_adapter_dtype ? DType::Float32 : base_dtype;
  TensorId lora_a = g.adapter_parameter(name + ".lora_A.default.weight", {lora.r, in_features}, adapter_dtype);
  TensorId lora_b = g.adapter_parameter(name + ".lora_B.default.weight", {out_features, lora.r}, adapter_dtype);
  const DType result_dtype = g.tensor(result).dtype;
  TensorId adapter_input = g.cast(x, adapter_dtype, name + ".lora_input_cast");
  adapter_input = dropout_with(g, name + ".lora_dropout", adapter_input, g.context().training ? lora.dropout : 0.0);
  TensorId down = dense_linear(g, name + ".lora_A", adapter_input, lora_a, kNoTensor, in_features, lora.r, false);
  TensorId up = dense_linear(g, name + ".lora_B", down, lora_b, kNoTensor, lora.r, out_features, false);
  TensorId scaled = scale(g, name + ".lora_scaling", up);
  TensorId sum = add(g, name + ".lora_add", result, scaled);
  return g.cast(sum, result_dtype, name + ".lora_result_cast");
}

// IA3 (PEFT 0.21.2 ia3/layer.py Linear.forward): ia3_scaling = 1 * ia3_l.flatten() (a new
// vector); a feedforward module scales its input, x.to(ia3 dtype) * scaling then .to(x's dtype),
// before the base layer; the others scale the base output, (result * scaling).to(result dtype).
// The vector is [1, in] or [out, 1], fp32 (torch.randn at the default dtype, kept fp32 by
// get_peft_model's autocast_adapter_dtype on a 16-bit base).
TensorId ia3_linear(GraphBuilder& g, const std::string& name, TensorId x, TensorId weight, TensorId bias,
                    int64_t in_features, int64_t out_features, bool copy_input, bool quantized) {
  const Ia3Config& ia3 = g.context().job->training.ia3;
  const bool feedforward = ia3_feedforward(ia3, g.qualified(name));
  auto base = [&](TensorId input) {
    return quantized ? quantized_linear_op(g, name, input, weight, bias, in_features, out_features)
                     : dense_linear(g, name, input, weight, bias, in_features, out_features, copy_input);
  };
  if (feedforward) {
    TensorId vector = g.adapter_parameter(name + ".ia3_l.default", {1, in_features}, DType::Float32);
    TensorId scaling = scale(g, name + ".ia3_scaling", vector);
    const DType input_dtype = g.tensor(x).dtype;
    TensorId scaled = mul(g, name + ".ia3_mul", g.cast(x, DType::Float32, name + ".ia3_input_cast"), scaling);
    return base(g.cast(scaled, input_dtype, name + ".ia3_interm_cast"));
  }
  TensorId result = base(x);
  TensorId vector = g.adapter_parameter(name + ".ia3_l.default", {out_features, 1}, DType::Float32);
  TensorId scaling = scale(g, name + ".ia3_scaling", vector);
  const DType result_dtype = g.tensor(result).dtype;
  return g.cast(mul(g, name + ".ia3_mul", result, scaling), result_dtype, name + ".ia3_result_cast");
}

}  // namespace

QuantizedStorage quantized_storage(const WeightsConfig& weights, uint64_t numel, int64_t out_features) {
  QuantizedStorage storage;
  if (four_bit(weights.format)) {
    storage.weight_bytes = ceil_div(numel, 2);
    const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
    if (weights.library == scenario::QuantLibrary::Torchao) {
      // torchtune's NF4 (bf16 weights): int8 scalers, per-256 factors and the mean in the
      // weight's dtype, the 16-entry table in it too (2 bytes each for bf16).
      storage.state_bytes = blocks + ceil_div(blocks, 256) * 2 + 2 + 16 * 2;
      return storage;
    }
    // Double quantization keeps the int8 absmax, its fp32 second level, the offset and the
    // 256-entry map quantize_blockwise copies into the nested QuantState.
    storage.state_bytes = weights.double_quant ? blocks + ceil_div(blocks, 256) * 4 + 4 + 256 * 4 : blocks * 4;
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
  const bool quantized = quantized_linear(job.weights, module);
  if (ia3_targets(job.training.ia3, module)) {
    return ia3_linear(g, name, x, weight, bias, in_features, out_features, copy_input, quantized);
  }
  TensorId result = quantized ? quantized_linear_op(g, name, x, weight, bias, in_features, out_features)
                              : dense_linear(g, leaf, x, weight, bias, in_features, out_features, copy_input);
  if (!lora_targets(job.training.lora, module)) return result;
  if (job.training.lora.use_dora) {
    const DType adapter_dtype = job.training.lora.autocast_adapter_dtype ? DType::Float32 : g.tensor(weight).dtype;
    return dora_branch(g, name, x, result, weight, bias, in_features, out_features, adapter_dtype);
  }
  return lora_branch(g, name, x, result, in_features, out_features, quantized ? DType::Float32 : g.tensor(weight).dtype);
}

}  // namespace oomcast::planner::ops
