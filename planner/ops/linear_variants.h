// The linears a job changes (planner/ops/linear_variants.cc): LoRA adapters on a linear
// (PEFT's lora.Linear), and base weights stored by bitsandbytes (Linear8bitLt, Linear4bit).
#pragma once

#include <cstdint>
#include <string_view>

#include "planner/ops/graph_builder.h"

namespace oomcast::planner::ops {

// nn.Linear itself (addmm / mm on the flattened input), without adapters or quantization.
TensorId dense_linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                      int64_t in_features, int64_t out_features, bool copy_input);

// The module's linear as the job has it: quantized base when weights.format says so, plus a
// LoRA branch when training.trainable.lora targets the module.
TensorId job_linear(GraphBuilder& g, std::string_view leaf, TensorId x, TensorId weight, TensorId bias,
                    int64_t in_features, int64_t out_features, bool copy_input);

// Bytes of one quantized weight of `numel` elements and of its quantization state.
struct QuantizedStorage {
  uint64_t weight_bytes = 0;   // packed int8 / two 4-bit codes per byte
  uint64_t state_bytes = 0;    // absmax (and its second-level scales), code tables, row scales
};
QuantizedStorage quantized_storage(const scenario::WeightsConfig& weights, uint64_t numel, int64_t out_features);

}  // namespace oomcast::planner::ops
