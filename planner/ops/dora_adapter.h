// DoRA (training.trainable.lora.use_dora): PEFT's weight-decomposed LoRA on a linear
// (planner/ops/dora_adapter.cc).
#pragma once

#include <cstdint>
#include <string>

#include "planner/ops/graph_builder.h"

namespace oomcast::planner::ops {

// The DoRA branch added to `result` = base_layer(x) of linear `name` (weight `weight`, `bias`
// or kNoTensor): registers lora_A, lora_B and the magnitude vector and returns the layer's
// output. `adapter_dtype`: the adapters' dtype.
TensorId dora_branch(GraphBuilder& g, const std::string& name, TensorId x, TensorId result, TensorId weight,
                     TensorId bias, int64_t in_features, int64_t out_features, DType adapter_dtype);

}  // namespace oomcast::planner::ops
