// Dtype sizes and the per-regime rules of ../shared/docs/training-memory-model.md §3.1-3.3.
#include "planner/precision.h"

namespace oomcast::planner {

using scenario::Precision;

uint64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::Bool: return 1;
    case DType::UInt8: return 1;
  }
  return 4;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::BFloat16;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (!is_floating(a)) return b;
  if (!is_floating(b)) return a;
  // Any mix of two different floating dtypes ends in fp32 (fp16 + bf16 included).
  return DType::Float32;
}

DType PrecisionRules::matmul_dtype(DType dtype) const {
  if (autocast && is_floating(dtype)) return low_dtype;
  return dtype;
}

bool PrecisionRules::upcasts_to_fp32(DType dtype) const {
  return autocast && is_floating(dtype) && dtype != DType::Float32;
}

PrecisionRules precision_rules(Precision precision) {
  PrecisionRules rules;
  switch (precision) {
    case Precision::Fp32:
      break;
    case Precision::AmpBf16:
      rules.autocast = true;
      rules.low_dtype = DType::BFloat16;
      break;
    case Precision::AmpFp16:
      rules.autocast = true;
      rules.low_dtype = DType::Float16;
      rules.grad_scaler = true;
      break;
    case Precision::PureBf16:
      // model.to(torch.bfloat16): parameters, buffers and activations are bf16; no autocast.
      rules.parameter_dtype = DType::BFloat16;
      rules.low_dtype = DType::BFloat16;
      rules.fp32_master_weights = true;
      break;
  }
  return rules;
}

}  // namespace oomcast::planner
