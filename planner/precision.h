// Tensor dtypes and the precision regimes of ../shared/docs/training-memory-model.md §3: which dtype the
// parameters, activations and matmuls use, and whether autocast (with its weight cache) is on.
#pragma once

#include <cstdint>

#include "scenario/scenario.h"

namespace oomcast::planner {

enum class DType : uint8_t { Float32, Float16, BFloat16, Int64, Int32, Bool, UInt8 };

uint64_t dtype_bytes(DType dtype);
const char* dtype_name(DType dtype);
bool is_floating(DType dtype);
// PyTorch's type promotion for two floating tensors (fp32 wins; fp16 with bf16 gives fp32).
DType promote_types(DType a, DType b);

// What one precision regime means for dtypes.
struct PrecisionRules {
  DType parameter_dtype = DType::Float32;  // what model.parameters() hold
  DType low_dtype = DType::Float32;         // the 16-bit dtype autocast casts matmul inputs to
  bool autocast = false;                    // torch.autocast active around forward and loss
  bool fp32_master_weights = false;         // pure_bf16: the optimizer keeps fp32 copies
  bool grad_scaler = false;                 // amp_fp16 uses torch.cuda.amp.GradScaler

  // The dtype a matmul-class op (linear, bmm, conv, sdpa) computes in for an input of `dtype`.
  DType matmul_dtype(DType dtype) const;
  // True when autocast runs an fp32-class op (layer_norm, log_softmax) on a 16-bit input by
  // casting it up first.
  bool upcasts_to_fp32(DType dtype) const;
};

PrecisionRules precision_rules(scenario::Precision precision);

}  // namespace oomcast::planner
